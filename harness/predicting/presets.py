"""Machines at hand for a prediction: presets.json's well-known machines, each with its memory
bandwidth and peak math per precision and the public source of each figure, and the machines
measured under results/. A machine at one precision is a Target.

    python two_phases.py --predict h100-sxm --dtype bfloat16
"""
import dataclasses
import difflib
import functools
import os
import re

from harness import flags
from harness.datasheets import known, preset_name, spaced, variants
from harness.terminal import note, quoted
from harness.measuring.speeds import Speeds
from harness.keeping import results, schema
import accounting

GIVEN = "given"  # the machine of --forklift and --workbench, or of --roofs
GIB = 2 ** 30  # bytes: a device reports its memory in GiB (nvidia-smi's MiB), as presets.json does
UTILIZATION = 0.9  # of a GPU's memory an engine lets itself use: vLLM's gpu_memory_utilization
RUNTIME_GIB = (1.79, 3.58)  # what an engine holds besides the tables, the notes and a trip's
#   working space, on one GPU and on each of several: vLLM's non-torch memory (the CUDA context,
#   and NCCL's buffers when split) for Llama 3 8B on an H100, alone and at -tp 2 (its memory
#   profile, vllm-project/vllm#10511)
LATENCY_S = 6e-6  # one small all-reduce over NVLink: NCCL on two H100s of an HGX node, with
#   CUDA graphs, 128 B to 64 KiB (NVIDIA/nccl#1259); more devices, or a slower link, take longer
LATENCY_WORDS = ("latency: 6 us an all-reduce, two a floor, which no work hides (NCCL on two "
                 "H100s over NVLink, NVIDIA/nccl#1259: more devices or a slower link take "
                 "longer, so a floor)")
WEIGHTS_ONLY = ("int8-weights", "int4-weights")  # tables kept small, unpacked to 16 bits for
#   the math, as most engines run a quantized model: its math runs at the machine's 16-bit rate


def math_of(dtype, workbench):
    """The precision a table's math runs at, of those a machine's workbench names: its own, or,
    weights only, the 16-bit rate (bfloat16's, else float16's, else float32's)."""
    if dtype not in WEIGHTS_ONLY:
        return dtype
    return next((p for p in ("bfloat16", "float16") if p in workbench), "float32")


@dataclasses.dataclass(frozen=True)
class Target:
    """One machine at one precision: the name asked for, its title, its two speeds at that
    precision (with their sources), the precision of a table number and of a note, and its
    memory ([bytes, source]; None where none is published), and how many of it the model is
    split over (tensor parallel), their link's speed among the roofs."""
    name: str
    title: str
    roofs: Speeds
    dtype: str
    note_dtype: str
    memory: tuple = None
    devices: int = 1
    quantize_head: bool = False  # the LM head and embedding at the tables' 8 or 4 bits too
    act_dtype: str = ""  # the activations' precision, the math's, where asked (--act-dtype)
    half: str = accounting.HEAD_DTYPE  # its 16-bit precision: bfloat16, or float16 where it has no
    #                               bfloat16 math
    link: tuple = ()  # (the link's speed the preset gives, GB/s each way; the peer links it
    #                   sums, of which split devices use devices - 1 (1: a switch, all of it at
    #                   once); the most devices it joins (None: any))
    utilization: float = 1.0  # the share of its memory an engine lets itself use (a GPU's:
    #                           --memory-utilization); 1: the whole, no engine's reserve

    @property
    def room(self):
        """The bytes the model may hold on one device: its memory, or, under an engine's
        reserve, that share of it less the runtime's own (RUNTIME_GIB); None where unknown."""
        if not self.memory:
            return None
        if self.utilization >= 1:
            return self.memory[0]
        return self.memory[0] * self.utilization - RUNTIME_GIB[self.devices > 1] * GIB

    @property
    def reserve(self):
        """The engine's reserve in words, '' where there is none."""
        return "" if self.utilization >= 1 else (
            f"an engine lets the model {self.utilization:g} of the memory, less "
            f"{RUNTIME_GIB[self.devices > 1]:g} GiB for its runtime")

    @property
    def head_dtype(self):
        """The LM head's and embedding's precision: 16 bits where the tables are 8 or 4 (as
        engines keep them), unless --quantize-head; else the tables' own."""
        small = accounting.DTYPE_BYTES[self.dtype] < 2 and not self.quantize_head
        return self.half if small else self.dtype

    def split(self, devices):
        """This machine with the model split over `devices` of it, the link's speed what that
        many use: a full mesh (AMD's Infinity Fabric) gives each device devices - 1 of its
        peer links, a switch (NVLink, NVSwitch) all of it."""
        if not self.link or devices < 2:
            return dataclasses.replace(self, devices=devices)
        speed, peers, _ = self.link
        each = speed * min(devices - 1, peers) / peers * self.roofs.reached
        return dataclasses.replace(self, devices=devices,
                                   roofs=dataclasses.replace(self.roofs, link_per_s=each * 1e9))

    @property
    def math_dtype(self):
        """The activations' precision, which the math runs at: --act-dtype's, else a
        weights-only model's 16 bits, else the tables' own."""
        return self.act_dtype or (self.half if self.dtype in WEIGHTS_ONLY else self.dtype)

    @property
    def precision(self):
        """Its precision in words, the tables', the activations' and the notes' always named,
        the head's where it differs from the tables': 'bfloat16 tables/activations/notes',
        'fp8 tables/activations, bfloat16 notes/head'."""
        parts = {}
        for what, p in (("tables", self.dtype), ("activations", self.math_dtype),
                        ("notes", self.note_dtype), ("head", self.head_dtype)):
            if what != "head" or p != self.dtype:
                parts.setdefault(p, []).append(what)
        return ", ".join(f"{p} {'/'.join(whats)}" for p, whats in parts.items())

    @property
    def label(self):
        return f"{self.name}{self.times} {self.precision}"

    @property
    def times(self):
        """' x2' for a model split over two of it; '' on one."""
        return f" x{self.devices}" if self.devices > 1 else ""

    @property
    def most(self):
        """The most devices its link joins (None: any)."""
        return self.link[2] if self.link else None

    @property
    def linked(self):
        """Whether several of it can hold one model: a link between them is published."""
        return self.roofs.link_per_s < float("inf")

    def config(self, cfg):
        return dataclasses.replace(cfg, dtype=self.dtype, note_dtype=self.note_dtype,
                                   devices=self.devices, head_dtype=self.head_dtype,
                                   act_dtype=self.act_dtype)


@functools.lru_cache(maxsize=None)
def target(text, dtype, note_dtype, out, act_dtype=None):
    """The Target a --predict word names: NAME or NAME:PRECISION, NAME from presets.json or a
    folder under out holding a machine_speed.py result; or raise ValueError in one line.
    act_dtype: the activations' precision, which the math runs at (--act-dtype), where asked."""
    name, colon, asked = text.partition(":")
    said = quoted(text, 60)
    name = name.lower() if name.lower() in known() else name  # H100-SXM as h100-sxm
    dtype = asked if colon else dtype or served(name)
    if dtype not in accounting.DTYPE_BYTES:
        raise ValueError(f"{said}: the precision after ':' must be one of "
                         f"{', '.join(accounting.DTYPE_BYTES)}")
    entry = known().get(name)
    mixed(name, dtype, act_dtype)
    math_dtype = act_dtype or math_of(dtype, entry["workbench"] if entry else ("float32",))
    note_dtype = note_dtype or notes_of(dtype, math_of(
        "int8-weights", entry["workbench"] if entry else ("float32",)))
    if entry:
        bench = entry["workbench"].get(math_dtype)
        if bench is None:
            raise ValueError(f"{said}: presets.json gives {name} no {math_dtype} math speed"
                             + (" (--act-dtype's)" if act_dtype else "")
                             + f"; it has {', '.join(entry['workbench'])}" + (
                                 "" if colon or act_dtype else f" (name it {name}:PRECISION)"))
        memory, link = entry.get("memory"), entry.get("link")
        return Target(name, entry["title"], Speeds(
            entry["forklift"][0] * 1e9, bench[0] * 1e9,
            f"forklift: {entry['forklift'][1]}; workbench: {bench[1]}"
            + (f"; link: {link[1]}; {LATENCY_WORDS}" if link else ""),
            link_per_s=link[0] * 1e9 if link else float("inf"),
            link_latency_s=LATENCY_S if link else 0.0), dtype, note_dtype,
            (memory[0] * GIB, memory[1]) if memory else None, act_dtype=act_dtype or "",
            half=math_of("int8-weights", entry["workbench"]),
            link=(*(link + [1, None])[:1], *(link + [1, None])[2:4]) if link else ())
    folder = re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name) and next(
        (os.path.join(where, name) for where in (out, results.REFERENCES)
         if os.path.isfile(os.path.join(where, name, "machine_speed.json"))), None)
    if folder:  # a machine measured here (or shipped): its own speeds, in float32
        if dtype != "float32" or note_dtype != "float32" or act_dtype not in (None, "float32"):
            raise ValueError(f"{said}: {name} was measured in float32, its only precision")
        if folder.startswith(out) and os.path.isdir(os.path.join(results.REFERENCES, name)):
            note(f"--predict {name}: the machine measured in {folder}, not the shipped one")
        try:
            roofs = schema.read_roofs(os.path.join(folder, "machine_speed.json"), follow=False)
        except ValueError as e:
            raise ValueError(f"{said}: its machine_speed.json {e}") from None
        return Target(name, f"{name} (measured)", roofs, dtype, note_dtype)
    word = name.lower()
    near = ([n for n in known() if n.startswith(word)][:1]  # h100: h100-sxm, its family's first
            or sorted((n for n in known() if word.startswith(n)), key=len)[-1:]  # gh200-96gb
            or difflib.get_close_matches(word, list(known()), n=1))
    raise ValueError(f"{said}: no such machine" + (f" (did you mean {near[0]}?)" if near else "")
                     + f"; known: {', '.join(known())}, or a folder of {out} or references/ "
                       f"holding machine_speed.json")


def notes_of(dtype, half):
    """The notes' precision where --note-dtype names none: the model's own 16 bits (`half`,
    bfloat16 or float16) under tables of 8 or 4 bits, as engines keep them (vLLM's
    kv_cache_dtype "auto": the model's dtype, fp8 notes only when asked); else the tables'."""
    return half if accounting.DTYPE_BYTES[dtype] < 2 else dtype


class Unpaired(ValueError):
    """--act-dtype's precision with tables no engine pairs it with."""


def mixed(name, dtype, act):
    """Refuse, in one line, activations an engine does not pair with these tables: narrower
    than the tables' numbers, or 8 bits of another kind than 8-bit tables' (fp8 with int8)."""
    if act is None or dtype in WEIGHTS_ONLY or act == dtype:
        return
    weighs = accounting.DTYPE_BYTES
    if weighs[act] < weighs[dtype] or weighs[act] == 1:
        raise Unpaired(f"{act} with {name}'s {dtype} tables: activations are as "
                         f"wide as the tables' numbers or wider (int4-weights or int8-weights "
                         f"with fp8 or int8, 8-bit tables with their own 8 bits or 16)")


def preset_of(device, dtype="float32"):
    """The preset of the device a run measured on ({"name": what its driver reports, ...}, or
    None), at the precision the run computed in: the presets.json machine one of whose
    device_names is that name exactly (case and spacing aside); None where none is (a CPU, a GPU
    the presets do not know, a variant, a MIG slice: see identified()) or its datasheet gives no
    speed at that precision."""
    name = preset_name(device)
    if name is None or dtype not in known()[name]["workbench"]:  # (no datasheet figure at it)
        return None
    return target(name, dtype, None, results.RESULTS)


def identified(device):
    """Why a GPU the run measured has no datasheet row, in a line, or None where it has one (or
    is no GPU): a variant of a preset (another GPU with other limits), a MIG slice (a part of the
    GPU, whose datasheet is the whole's), or a name the presets do not know."""
    said = (device or {}).get("name") or ""
    if not device or device.get("device", "").split(":")[-1] not in ("cuda", "mps") \
            or preset_name(device):
        return None
    whole, mig, _ = said.partition(" MIG ")
    if mig:
        near = preset_name({"name": whole})
        return (f"{said} is a MIG slice of {whole}: a part of the GPU, whose datasheet is the "
                f"whole's" + (f" (--predict {near})" if near else ""))
    chip = [n for n, e in known().items()
            if any(spaced(d).startswith(spaced(said) + ",") for d in e.get("device_names", ()))]
    if chip:  # an Apple chip whose GPU cores the system did not say
        return (f"{said}: its GPU cores were not reported, and the chip comes with several; "
                f"--predict {chip[0]} is its largest GPU ({known()[chip[0]]['title']})")
    variant = next((v for n, v in variants().items() if spaced(n) == spaced(said)), None)
    if variant:
        return (f"{said} is not {variant[0]}: it is {variant[1]}; --predict {variant[0]} is "
                f"the nearest preset")
    return f"{said}: no preset names it (presets.json's device_names)"


def served(name):
    """The precision a machine is predicted at when none is named: a GPU's 16-bit tensor rate
    (bfloat16, or float16 where it has no bfloat16), the precision it serves models in; any
    other machine's float32."""
    entry = known().get(name)
    if entry and "GPU" in entry["kind"]:
        return next((p for p in ("bfloat16", "float16") if p in entry["workbench"]), "float32")
    return "float32"


def targets(args):
    """The machines a prediction is for, in order: the speeds given (if any), then each named,
    each split over as many devices as args.devices says (once resolved: see predict)."""
    given = flags.given_speeds(args)
    dtype = args.dtype or "float32"
    act = getattr(args, "act_dtype", None)
    found = [Target(GIVEN, "the speeds given", given, dtype, args.note_dtype or notes_of(
                        dtype, accounting.HEAD_DTYPE), act_dtype=act or "")
             if name == GIVEN else target(name, args.dtype, args.note_dtype, args.out, act)
             for name in args.predict]
    devices = getattr(args, "devices", None) or [1] * len(found)
    quantize = bool(getattr(args, "quantize_head", False))
    share = getattr(args, "memory_utilization", None) or UTILIZATION
    reached = getattr(args, "efficiency", None) or 1.0
    return [dataclasses.replace(t, quantize_head=quantize, roofs=t.roofs.times(reached),
                                utilization=share if a_gpu(t.name) else 1.0).split(n)
            for t, n in zip(found, devices)]


def a_gpu(name):
    """Whether the machine of this name is a GPU, whose memory an engine shares (its preset
    says so)."""
    return "GPU" in (known().get(name) or {}).get("kind", "")
