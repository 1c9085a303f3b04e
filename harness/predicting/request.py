"""A whole request predicted, as a user sees it: a batch of users each sending a PROMPT-token
question and getting OUTPUT tokens back. The questions are read together in one trip, which
gives every user its first word; then OUTPUT - 1 typing steps, each user's notebook one note
deeper every step. Every step at its limit, on every machine named, side by side.

    python two_phases.py --predict h100-sxm h200-sxm:fp8 --model llama-3-70b --request 1024,256
"""
import argparse

import numpy as np

from harness.terminal import plural, quoted
from harness.keeping import records
from harness.keeping.records import SIG, Layout, col
from harness.predicting.plans import verdict
from harness.showing.printers import Sheet
import accounting


LONGEST = 10 ** 7  # tokens of a question or an answer: past any model's context


def pair(text):
    """An argparse type, --request's PROMPT,OUTPUT: two whole numbers of at least 1."""
    parts = text.split(",")
    if len(parts) != 2 or not all(p.strip().isdigit() and 1 <= int(p) <= LONGEST
                                  for p in parts):
        raise argparse.ArgumentTypeError(
            f"must be PROMPT,OUTPUT, two whole numbers from 1 to {LONGEST:,} (a question's "
            f"tokens and the answer's), e.g. 1024,256; got {quoted(text)}")
    return int(parts[0]), int(parts[1])


def typing_steps(cfg, roofs, prompt, output, users, serial=False):
    """The seconds of each of the OUTPUT - 1 typing steps, every user with PROMPT + i notes at
    step i: an array. Bytes and FLOPs both grow by the same amount a step (one note more each),
    so each step's limit is read off the first two steps' counts, exactly."""
    steps = np.arange(output - 1, dtype=np.float64)
    first, second = (accounting.typing_load(prompt + i, users) for i in (0, 1))
    fetch = [accounting.bytes_read(cfg, load) / roofs.bytes_per_s for load in (first, second)]
    math = [accounting.trip_flops(cfg, load) / roofs.flops_per_s for load in (first, second)]
    sent = accounting.link_bytes(cfg, first) / roofs.link_per_s if cfg.devices > 1 else 0.0
    fetching = fetch[0] + steps * (fetch[1] - fetch[0])
    working = math[0] + steps * (math[1] - math[0])
    work = np.maximum(fetching, working)
    wait = accounting.link_wait(cfg, roofs.link_latency_s)  # no work hides it (accounting.limit)
    return (work + sent if serial else np.maximum(work, sent)) + wait


def predicted(cfg, roofs, prompt, output, users, serial=False):
    """One batch's request: {first word, typing seconds (every step), total} in seconds."""
    read = [(0, prompt)] * users
    first = roofs.serial(cfg, read) if serial else roofs.limit(cfg, read)[0]
    typed = typing_steps(cfg, roofs, prompt, output, users, serial)
    return {"first": first, "typing": typed, "total": first + float(typed.sum())}


def bytes_held(cfg, prompt, output, users):
    """What a batch's request holds on one device beyond the tables, in bytes: (every user's
    notes at the end, its question and each token typed after the first word, PROMPT + OUTPUT -
    1; the working space of its biggest trip: the questions read as engines read them, in steps
    of a few thousand tokens (accounting.STEP_TOKENS), or the last typing step's, as the fit
    grid counts it)."""
    notes = accounting.note_bytes(cfg) * accounting.notes_share(cfg)
    return (notes * users * (prompt + output - 1),
            max(accounting.reading_scratch_bytes(cfg, prompt, users),
                accounting.typing_scratch_bytes(cfg, prompt + output - 1, users)))


def memory_needed(cfg, prompt, output, users):
    """What one device holds at the request's end: the tables and bytes_held()."""
    return accounting.held_bytes(cfg) + sum(bytes_held(cfg, prompt, output, users))


def request_row(cfg, aim, prompt, output, users):
    """A batch's row: its machine, how long each user waits, and how fast words come."""
    at = predicted(cfg, aim.roofs, prompt, output, users)
    typing = at["typing"]
    per_token = float(typing.mean()) if typing.size else None
    need = memory_needed(cfg, prompt, output, users)
    return {"name": f"{aim.name}{aim.times}", "precision": aim.precision, "users": users,
            "first word": at["first"] * 1e3,
            "per token": per_token * 1e3 if per_token is not None else None,
            "total": at["total"] * 1e3,
            "serial": (predicted(cfg, aim.roofs, prompt, output, users, serial=True)["total"]
                       * 1e3 if cfg.devices > 1 else None),
            "user rate": output / at["total"], "all rate": users * output / at["total"],
            "memory": verdict(need, aim.room) if aim.room is not None else None}


def request_sheet(base, aimed, args, settings):
    """The whole request, each machine named and each batch of --users, side by side."""
    prompt, output = args.request
    rows = [request_row(t.config(base), t, prompt, output, u) for t in aimed for u in args.users]
    linked = any(t.devices > 1 for t in aimed)
    layout = Layout(REQUEST.name, [c for c in REQUEST.columns if c.figure != "serial" or linked],
                    title=REQUEST.title)
    return Sheet(layout, records.make(layout, rows, settings, predicted=True),
                 settings=f"{base}; each user sends a question of {prompt:,} "
                          f"{plural(prompt, 'token')} and gets {output:,} "
                          f"{plural(output, 'token')} back, the batch's questions read in one "
                          f"trip",
                 note=("(predicted: every step at its limit; first word: the batch's questions "
                       "read together, which gives each user its first token; per token: "
                       + (f"the mean of the {output - 1:,} typing {plural(output - 1, 'step')} "
                          f"after it, each user's notes one deeper each step" if output > 1
                          else "none, the answer being its first word")
                       + "; total: the first word and every step; tokens/s a "
                       "user: OUTPUT over the total, what one user sees; all users: the batch's"
                       + ("; total link serial: with each step's sends over the link after its "
                          "work, the other bound" if linked else "")
                       + "; memory: the tables, every user's notes at the end and the working "
                         f"space of the biggest step, the questions read in steps of "
                         f"{accounting.STEP_TOKENS:,} tokens as engines read them (the fit grid's "
                         "rule); nothing was run, and a real engine reaches some fraction of "
                         "each limit)"))


REQUEST = Layout("request", [
    col("name", "machine", "", "s", key=True), col("precision", "precision", "", "s", key=True),
    col("users", "users", "users", "d", key=True),
    col("first word", "first word ms", "ms", SIG), col("per token", "per token ms", "ms", SIG),
    col("total", "total ms", "ms", SIG), col("serial", "total link serial ms", "ms", SIG),
    col("user rate", "tokens/s a user", "tokens/s", SIG),
    col("all rate", "tokens/s all users", "tokens/s", SIG),
    col("memory", "memory", "", "s", empty="unknown")],
    title="A whole request, PREDICTED")
