"""The machines compare.py holds side by side: found by name or folder, read as their last whole
save left them, each described in one line with the settings its figures were measured with."""
import os

from harness.post import SIZE
from harness.terminal import note
from harness.measuring import host
from harness.measuring.speeds import CACHE_RULE
from harness.keeping import results, schema
from accounting import BYTES




def machine_folders(names, problems):
    """The folders to compare: each name a results folder, a folder of them (results/), or the
    name of a shipped reference or of a machine under results/ ('post', 'amd-epyc-2c'). With no
    name: the post's figures, then every machine under results/ (the shipped ones if none)."""
    if not names:
        mine = machines_in(results.RESULTS)
        return [os.path.join(results.REFERENCES, "post")] + (mine or [
            f for f in machines_in(results.REFERENCES) if os.path.basename(f) != "post"])
    found = []
    for name in names:
        if not name:
            problems.append("'': not a folder's name; give a results folder, or a name")
            continue
        mine, shipped = os.path.join(results.RESULTS, name), os.path.join(results.REFERENCES, name)
        if not os.path.isdir(name) and os.path.isdir(mine) and os.path.isdir(shipped):
            note(f"compare.py: {name} is both a machine of yours ({mine}) and a shipped "
                 f"reference ({shipped}): comparing yours; give references/{name} for the other")
        where = [name, mine, shipped, os.path.join(os.path.dirname(results.RESULTS), name)]
        folder = next((w for w in where if os.path.isdir(w)), None)  # yours before shipped
        if folder is None and os.path.exists(name):
            problems.append(f"{name}: is a file, not a results folder")
        elif folder is None:
            problems.append(f"{name}: no such results folder, nor a shipped reference or a "
                            f"machine under {results.RESULTS} of that name")
        elif holds_results(folder, quick=True):
            found.append(folder)
        else:
            found += sorted(machines_in(folder), key=lambda f: os.path.basename(f) != "post"
                            ) or machines_in(folder, quick=True) or [folder]
            #   a folder of machines (the post's first), or of quick runs only (said), or empty
    once = {}
    for f in found:  # each folder once, however it was named, where it was first named
        once.setdefault(os.path.realpath(f), f)
    return list(once.values())


def holds_results(folder, quick=False):
    """Whether folder holds a full run's result (or, with quick, a quick run's)."""
    return any(os.path.isfile(os.path.join(folder, s + e)) for s in results.SCRIPTS
               for e in (".json", ".sweep.json", *[".quick.json"] * quick))


def machines_in(folder, quick=False):
    """The result folders directly inside folder that hold a full run (quick runs are smoke,
    unless quick)."""
    if not os.path.isdir(folder):
        return []
    try:
        names = os.listdir(folder)
    except OSError as e:  # a folder this user cannot list: its machines are not found
        note(f"compare.py: {folder}: cannot be listed ({e.strerror or e}); its machines are "
             f"left out")
        return []
    return sorted(os.path.join(folder, d) for d in names
                  if os.path.isdir(os.path.join(folder, d)) and holds_results(
                      os.path.join(folder, d), quick))


def read_machine(folder, problems):
    """{file stem: data} of one machine's folder: each script's plain run, and its thread sweep
    (<script>.sweep); what cannot be used goes to problems. The folder is read as its last
    whole save left it, waiting for a save under way, and nothing in it is changed."""
    found = {}
    try:
        with results.locked(folder, shared=True):
            paths, half_done = results.as_saved(folder)
    except (OSError, ValueError) as e:
        problems.append(f"{folder}: {e}")
        return None
    if half_done:
        note(f"compare.py: {half_done}")
    for script in results.SCRIPTS:
        for stem in (script, script + ".sweep"):
            if stem + ".json" in paths:
                try:
                    found[stem] = schema.load(paths[stem + ".json"], script)
                    if not found[stem]["records"]:
                        raise ValueError("holds no figures")
                except ValueError as e:
                    found.pop(stem, None)
                    problems.append(f"{os.path.join(folder, stem + '.json')}: {e}; left out")
    if not found and not any(p.startswith(folder + os.sep) for p in problems):
        quick = sorted(n for n in paths if n.endswith(".quick.json"))
        problems.append(f"{folder}: " + (
            f"holds only quick runs ({', '.join(quick)}), which compare.py leaves out: run "
            f"the scripts without --quick" if quick
            else f"no result files of {', '.join(results.SCRIPTS)}"))
    return found


def previous(folder, problems):
    """{file stem: data} of the run each script kept in the folder's history/ before its last
    (its newest entry there): the same machine's previous run; {} where none is kept. Read as
    read_machine reads, nothing changed, and never through a link: history/ and its entries are
    held open within the folder (what a results folder holds never leads a reader elsewhere)."""
    from harness.keeping import held, history
    found = {}
    try:
        with held.opened(results.HISTORY, within=folder) as kept:
            for script in results.SCRIPTS:
                names = history.entries(kept, script)
                if not names:
                    continue
                where = os.path.join(kept.at(names[-1]), script + ".json")
                with held.opened(names[-1], within=kept) as entry:
                    raw = entry.read(script + ".json", schema.FILE_MAX)
                try:
                    if raw is None:
                        raise ValueError("is not a results file (a link, or none)")
                    found[script] = schema.parse(raw, script)
                except ValueError as e:
                    problems.append(f"{where}: {e}; left out")
    except (OSError, ValueError):
        return found  # no history/ (or a link, or none this user can read): no previous run
    return found


def describe(name, found):
    """One line for a machine: its machine line, or what the published entry or the prediction
    says it is; then the settings its figures were measured with, script by script."""
    data = next(iter(found.values()))
    if data.get("published"):
        line = f"{name}: {data['published']}"
    elif data.get("predicted"):
        line = f"{name}: {data['predicted'].removeprefix('machine: ')}"
    else:
        line = f"{name}: {host.line(data['machine'])}"
    ran = "; ".join(f"{stem} " + ", ".join(f"{k} {v}" for k, v in ran.items())
                    for stem, ran in shared_settings(found).items() if ran)
    return line + (f" | settings: {ran}" if ran else "")


def shared_settings(found):
    """{file stem: the settings its records share, of those that make figures alike}."""
    out = {}
    for stem, data in found.items():
        seen = [r["settings"] for r in data["records"]]
        out[stem] = {k: seen[0][k] for k in (*ALIKE, "threads")
                     if seen and seen[0].get(k) not in (None, False)
                     and all(s.get(k) == seen[0][k] for s in seen)}
    return out


def short_names(folders):
    """A column name per folder: its own name, with as much of its path as tells it apart."""
    parts = [os.path.normpath(os.path.abspath(f)).split(os.sep) for f in folders]
    for depth in range(1, max(map(len, parts)) + 1):
        names = ["/".join(p[-depth:]) for p in parts]
        if len(set(names)) == len(names):
            return names
    return [f"{p[-1]} ({i + 1})" for i, p in enumerate(parts)]  # one folder, named twice


ALIKE = ("model", "notes", "typers", "question", "size", "matmul", "tokens", "quick", "predict",
         "dtype", "note_dtype", "devices", "quantize_head",
         "act_dtype")
#         the settings two figures must share to be compared: what they measured, not how


def unlike_settings(a, b):
    """How two figures' settings differ, in a few words ('--notes 128 against 512'), or ''.
    A setting one side did not save is no difference (the post's own figures keep few); a
    prediction and a measurement always differ (MADE: whether each was predicted)."""
    if a.get(MADE, False) != b.get(MADE, False):
        return "a prediction against a measurement: a limit is no timing"
    return ", ".join(f"--{k} {b[k]} against {a[k]}" for k in ALIKE
                     if k in a and k in b and a[k] != b[k]
                     and not (k == "size" and read_from(a) == read_from(b) == "memory"))


def read_from(settings):
    """Where a forklift of these settings read its table from: "memory" where the table was at
    least CACHE_RULE x the cache the run recorded (or, where it recorded none, at least the
    post's), else "cache". Two memory readings compare whatever their sizes (a machine with a
    larger cache reads a larger table); a cache reading compares with none."""
    size, cache = settings.get("size"), settings.get("cache_bytes")
    if type(size) is not int:
        return None
    if type(cache) in (int, float) and cache > 0:
        return "memory" if size * size * BYTES >= CACHE_RULE * cache else "cache"
    return "memory" if size >= SIZE else "cache"


MADE = " predicted"  # in the settings a figure is compared with: its record's own flag
