"""Where the arrays live: NumPy's (the default, the post's), or PyTorch's or CuPy's on a device
they name, each imported only when asked. A Device makes arrays there, in the run's precision,
times what the device does (on an NVIDIA GPU by its own events: a GPU runs ahead of Python, and
a region's time is the device's, with no wait inside it), and says what it is.

    python two_phases.py --device torch:cuda     # an NVIDIA GPU; torch:mps on an Apple laptop
    python two_phases.py --device torch:cpu      # PyTorch on this CPU: the same tables
"""
import dataclasses
import functools
import os
import time

import numpy as np

from harness.measuring import nvidia

LIBRARIES = {"numpy": ("cpu",), "torch": ("cpu", "cuda", "mps"), "cupy": ("cuda",)}
GPUS = ("cuda", "mps")  # the kinds of device that are a GPU
DTYPES = {"numpy": ("float32",), "torch": ("float32", "bfloat16", "float16"),
          "cupy": ("float32", "float16")}  # what the model may compute in, by library (--dtype)
INSTALL = "pip install -r requirements-gpu.txt"  # the GPU libraries' own requirements
CUPY_FLOOR = 13  # CuPy's first major version the array API namespace runs the model on
ENV = ("TORCH_", "PYTORCH_", "NVIDIA_", "CUDA_", "CUBLAS_", "CUPY_")  # what a GPU library reads
#       from the environment (TORCH_ALLOW_TF32_CUBLAS_OVERRIDE, NVIDIA_TF32_OVERRIDE, ...)
AT_START = {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV)}  # as given, before
#                                                     a run takes any of them away (TF32's)


@dataclasses.dataclass(frozen=True)
class Device:
    """An array library on one device: its name as given ('numpy', 'torch:cuda'), the library
    module, its array API namespace, the device object it takes (None for NumPy), the precision
    the model computes in there (--dtype), and whether float32 products may run in TF32 (--tf32:
    an NVIDIA GPU's coarser, faster float32; off unless asked)."""
    name: str
    library: object
    xp: object
    device: object = None
    dtype: str = "float32"
    tf32: bool = False

    @property
    def numpy(self):
        return self.device is None

    @property
    def kind(self):
        """'cpu', 'cuda' or 'mps': what runs the work."""
        return "cpu" if self.numpy else getattr(self.device, "type", "cuda")

    @property
    def gpu(self):
        return self.kind in GPUS

    @property
    def torch(self):
        return self.library.__name__ == "torch"

    def type_of(self, dtype):
        """The library's own dtype of a name ('bfloat16')."""
        return getattr(self.library, dtype)

    def asarray(self, a, dtype="float32"):
        """A NumPy array (float32) as this device's array, copied there, in dtype."""
        if self.numpy:
            return a
        out = self.xp.asarray(a, device=self.device, copy=True)
        return out if dtype == "float32" else self.xp.astype(out, self.type_of(dtype))

    def tables(self, floors):
        """A model's tables ([{name: NumPy array}], one dict per floor) copied to this device,
        in the run's precision."""
        return floors if self.numpy else [{k: self.asarray(t, self.dtype) for k, t in f.items()}
                                          for f in floors]

    def to_numpy(self, a):
        """An array of this device's as NumPy's float32 (copied back from a GPU)."""
        if self.numpy:
            return a
        if self.torch:
            return a.detach().to("cpu", self.library.float32).numpy()
        return np.asarray(a.get() if hasattr(a, "get") else a, dtype=np.float32)

    def concat(self, arrays, axis):
        """Arrays joined along an axis, on this device."""
        return np.concatenate(arrays, axis) if self.numpy else self.xp.concat(arrays, axis=axis)

    def threads(self, n):
        """Hold the library's own CPU threads to n (--threads), where it runs on this CPU."""
        if n and self.torch and self.kind == "cpu":
            self.library.set_num_threads(n)

    # ---- time: a mark at each end of a region, and the seconds between two marks

    def mark(self):
        """A region's end: on an NVIDIA GPU an event the device records when it gets there (no
        wait); elsewhere the host's clock, once the device has caught up."""
        if self.kind == "cuda":
            event = (self.library.cuda.Event(enable_timing=True) if self.torch
                     else self.library.cuda.Event())
            event.record()
            return event
        self.sync()
        return time.perf_counter()

    def between(self, start, end):
        """Seconds from mark start to mark end (waiting for the device to reach end)."""
        if self.kind != "cuda":
            return end - start
        end.synchronize()
        if self.torch:
            return start.elapsed_time(end) / 1e3
        return self.library.cuda.get_elapsed_time(start, end) / 1e3

    def sync(self):
        """Wait until the device has done what it was given."""
        if self.numpy or self.kind == "cpu":
            return
        if self.torch:
            if self.kind == "cuda":
                self.library.cuda.synchronize(self.device)
            else:
                self.library.mps.synchronize()
        else:  # CuPy
            self.library.cuda.Device().synchronize()

    def clock(self):
        """time.perf_counter() once the device has caught up."""
        self.sync()
        return time.perf_counter()

    def capture(self, run, back):
        """run (a trip) captured as a CUDA graph (torch:cuda): run twice on a side stream to warm
        up, as capturing requires (back() after each puts the notebooks back), then once under
        capture, then back(). -> a call that replays the graph: the device's work only."""
        torch = self.library
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                run()
                back()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            run()
        back()
        return graph.replay

    # ---- what the device is and holds

    def cache_bytes(self):
        """The device's last-level cache (an NVIDIA GPU's L2), or None where it is the CPU's or
        the library does not say."""
        if self.kind != "cuda":
            return None
        if self.torch:
            return getattr(self.library.cuda.get_device_properties(self.device),
                           "L2_cache_size", None) or None
        return self.library.cuda.runtime.getDeviceProperties(self.device.id).get(
            "l2CacheSize") or None

    def has_bf16(self):
        """Whether the model's and the workbench's bfloat16 runs here: PyTorch's on this CPU and
        on a GPU that computes it (an NVIDIA GPU from Ampere on); CuPy has no bfloat16."""
        if not self.torch:
            return False
        if self.kind == "cuda":
            return bool(self.library.cuda.is_bf16_supported())
        return self.kind == "cpu"

    def memory_used(self):
        """The most device memory the library held at once in this process, or None (NumPy's
        and a CPU's: the machine's own peak says it)."""
        if self.kind != "cuda":
            return None
        if self.torch:
            return int(self.library.cuda.max_memory_allocated(self.device))
        return int(self.library.get_default_memory_pool().total_bytes())

    def facts(self):
        """What the machine line says of the device: {"device", "library", "name",
        "memory_bytes", "cuda" (its runtime's version), "cache_bytes", "dtype", "tf32", "env"};
        None: NumPy's."""
        if self.numpy:
            return None
        lib, kind = self.library, self.kind
        out = {"device": self.name, "library": f"{lib.__name__} {lib.__version__}",
               "memory_bytes": None, "cuda": None, "name": kind, "cache_bytes": None,
               "dtype": self.dtype, "tf32": tf32_words(self), "env": dict(AT_START)}
        if self.torch and kind == "cuda":
            props = lib.cuda.get_device_properties(self.device)
            out.update(name=props.name, memory_bytes=props.total_memory,
                       cuda=f"CUDA runtime {lib.version.cuda}", cache_bytes=self.cache_bytes(),
                       uuid=uuid_of(props.name, str(getattr(props, "uuid", "") or "")))
        elif self.torch and kind == "mps":
            out.update(name=apple_chip() or "Apple GPU (mps)")
        elif self.torch:
            out.update(name="this CPU, through PyTorch")
        else:  # CuPy
            dev = lib.cuda.Device()
            props = lib.cuda.runtime.getDeviceProperties(dev.id)  # (its memory's free share
            uuid = props.get("uuid")  # would need a context: the properties do not)
            out.update(name=props["name"].decode(), memory_bytes=props.get("totalGlobalMem"),
                       cuda=f"CUDA runtime {lib.cuda.runtime.runtimeGetVersion()}",
                       cache_bytes=self.cache_bytes(),
                       uuid=uuid_of(props["name"].decode(), dashed(bytes(uuid).hex()))
                       if isinstance(uuid, (bytes, bytearray)) else None)
        if kind == "cuda":
            out["smi"] = nvidia.facts(out.get("uuid"))  # None where nvidia-smi is not here
        return out

    def others(self):
        """The processes on this GPU besides this run's (nvidia.census: {"others", "unseen"});
        None where it cannot be known (no NVIDIA GPU, no nvidia-smi)."""
        if self.kind != "cuda":
            return None
        return nvidia.census(self.facts().get("uuid"))


CAUSES = (  # what a GPU library's error says (lower case), and the cause in a user's words
    ("out of memory", "out of memory: {name} cannot hold the model, its notebooks and a trip "
                      "(smaller --notes, --users or --typers, or a GPU with more memory)"),
    ("no kernel image is available", "no kernel image for this GPU: this {library} was built "
                                     "without its architecture; install a build for it"),
    ("driver version is insufficient", "the NVIDIA driver is too old for this {library}'s CUDA: "
                                       "update the driver, or install a build for an older "
                                       "CUDA"),
    ("busy or unavailable", "the GPU is busy or unavailable: in exclusive-process mode another "
                            "process holds it (nvidia-smi lists which)"),
    ("no cuda gpus are available", "no CUDA GPU is visible to this process "
                                   "(CUDA_VISIBLE_DEVICES, or the container's devices)"))


class WrongAnswer(Exception):
    """The device's model does not give NumPy's answer (model_run.answered)."""


def failure(e, on):
    """One line naming the cause of a GPU library's error (out of memory, no kernel for this
    GPU, a driver too old, the GPU busy), or None where e is no device's error (a bug keeps its
    traceback)."""
    if on.numpy:
        return None
    if isinstance(e, WrongAnswer):
        return str(e)
    text, library = str(e).lower(), on.library.__name__
    cause = next((c for said, c in CAUSES if said in text), None)
    if cause:
        return cause.format(name=on.name, library="PyTorch" if on.torch else "CuPy")
    if "cuda" in text or type(e).__module__.split(".")[0] in (library, "cupy_backends"):
        said = str(e).strip().splitlines()
        return f"{on.name} failed: {said[0][:200] if said else type(e).__name__}"
    return None


def uuid_of(name, uuid):
    """A GPU's UUID as nvidia-smi lists it: 'GPU-...' for a whole GPU, 'MIG-...' for a slice of
    one (its name says MIG), whose UUID CUDA gives bare; None where there is none."""
    if not uuid:
        return None
    if uuid.startswith(("GPU-", "MIG-")):
        return uuid
    return ("MIG-" if " MIG " in f" {name} " else "GPU-") + uuid


def dashed(hexed):
    """32 hex digits in a UUID's groups, 8-4-4-4-12, as nvidia-smi writes them (CuPy gives
    them bare)."""
    return "-".join(hexed[a:b] for a, b in ((0, 8), (8, 12), (12, 16), (16, 20), (20, 32)))


def tf32_words(on):
    """Whether float32 products may run in TF32 on this device, as the machine line says it."""
    if not on.tf32:
        return "off"
    if AT_START.get("NVIDIA_TF32_OVERRIDE") == "0":
        return "off (asked for, but NVIDIA_TF32_OVERRIDE=0 holds it off)"
    return "on" if on.kind == "cuda" else "on (no effect off an NVIDIA GPU)"


def apple_chip():
    """'Apple M2 Max, 38-core GPU': the chip an Apple GPU is part of and its GPU cores (one chip
    comes with several), or None where the system does not say."""
    import re
    import subprocess

    def said(*command):
        try:
            return subprocess.run(command, capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            return ""
    chip = said("sysctl", "-n", "machdep.cpu.brand_string").strip()
    cores = re.search(r"Total Number of Cores:\s*(\d+)", said("system_profiler",
                                                              "SPDisplaysDataType"))
    return (chip + (f", {cores.group(1)}-core GPU" if cores else "")) or None


NUMPY = Device("numpy", np, np)


def named(text):
    """(library, kind) of a --device name, nothing imported and no device touched: a library
    alone names its first device ('cupy' is CuPy's 'cuda'); or raise ValueError in one line."""
    name, _, kind = str(text).partition(":")
    if name not in LIBRARIES or (kind and kind not in LIBRARIES[name]):
        raise ValueError("must be " + ", ".join(f"{lib}:{d}" if lib != "numpy" else lib
                                                for lib, kinds in LIBRARIES.items()
                                                for d in kinds) + f", got {str(text)[:40]!r}")
    return name, kind or LIBRARIES[name][0]


def on_a_gpu(text):
    """Whether a --device name (as a run's records keep it) runs on a GPU: the one answer the
    Device, the judges and every reader of the records give."""
    try:
        return named(text or "numpy")[1] in GPUS
    except ValueError:
        return False


@functools.lru_cache(maxsize=None)
def device(text, dtype="float32", tf32=False):
    """The Device `--device` names: numpy, torch:cpu, torch:cuda, torch:mps or cupy:cuda (a
    library alone: its first device), computing the model in dtype, float32 products in TF32
    only where tf32; or raise ValueError in one line (a library not installed, a device it does
    not have here, a CuPy too old)."""
    name, kind = named(text)
    if name == "numpy":
        return NUMPY
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # PyTorch's CPU threads sleep between
    #   its calls instead of spinning, leaving the cores to NumPy and the rest of the run
    tf32_setting(name, tf32)  # before the library makes its first product
    try:
        library, xp = __import__(name), namespace(name)
    except ImportError as e:
        raise ValueError(f"{text}: {e.name} is not installed ({INSTALL}, or the library's own "
                         f"instructions for a GPU)") from None
    if name == "torch":
        there = {"cpu": True, "cuda": library.cuda.is_available(),
                 "mps": library.backends.mps.is_available()}[kind]
        if not there:
            raise ValueError(f"{text}: PyTorch {library.__version__} has no {kind} device here"
                             + {"cuda": " (a CPU build: install a CUDA one for an NVIDIA GPU)"
                                if "+cpu" in library.__version__ else "",
                                "mps": " (mps is an Apple laptop's GPU, with PyTorch's macOS "
                                       "build)"}.get(kind, ""))
        where = library.device(kind)
        library.backends.cuda.matmul.allow_tf32 = tf32
        library.backends.cudnn.allow_tf32 = tf32
        library.set_float32_matmul_precision("high" if tf32 else "highest")
    else:
        major = int(library.__version__.split(".")[0])
        if major < CUPY_FLOOR:
            raise ValueError(f"{text}: CuPy {library.__version__} is too old: the model needs "
                             f"CuPy {CUPY_FLOOR} or later (pip install -U cupy-cuda12x)")
        try:
            if library.cuda.runtime.getDeviceCount() < 1:
                raise RuntimeError
        except Exception:
            raise ValueError(f"{text}: CuPy finds no CUDA device here") from None
        where = library.cuda.Device()
    return Device(f"{name}:{kind}", library, xp, where, dtype, tf32)


def namespace(library):
    """The array API namespace of a library, made without an array: making one would open a
    context on the GPU in the process that checks the flags, which then holds it (a GPU in
    exclusive-process mode would refuse every worker's)."""
    import importlib
    return importlib.import_module(f"array_api_compat.{library}")


def tf32_setting(library, tf32):
    """Set, before the library computes anything, whether its float32 products may run in TF32:
    off unless asked (a container's TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 would turn it on for
    every product, the workbench's too, behind the float32 the run says it measured)."""
    if library == "torch" and not tf32:
        os.environ.pop("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", None)
    if library == "cupy":
        os.environ["CUPY_TF32"] = "1" if tf32 else "0"
