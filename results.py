"""Results: one run's files saved into its results folder as one unit (under the folder's lock,
through a journal, never half written), and saved files read back with every field checked.
compare.py and two_phases --roofs read through here."""
import contextlib
import json
import math
import os
import secrets
import sys

from stopping import held_signals
from terminal import note

SCHEMA_VERSION = 3  # the JSON layout; 3: one samples layout for every table (samples_s)
READABLE = (1, 2, 3)  # the versions load() reads; older layouts are brought to the newest
TEMP, JOURNAL, LOCK = ".tmp-", ".replacing.json", ".lock"  # a results folder's own files
FILE_MAX = 1 << 24  # bytes: a results file is a few hundred KB; anything larger is not one


def files(stem, data, text, pictures, quick):
    """{file name: text, or a function that writes the file at the path it is given} of one
    result: <stem>.json, <stem>.txt and any pictures. A quick run's names say .quick, so that
    it never replaces a full run's."""
    q = ".quick" if quick else ""
    out = {f"{stem}{q}.json": json.dumps(data, indent=1, allow_nan=False) + "\n",
           f"{stem}{q}.txt": "\n".join(text) + "\n"}
    for name, draw in pictures.items():
        base, ext = os.path.splitext(name)
        out[f"{base}{q}{ext}"] = draw
    return out


@contextlib.contextmanager
def locked(folder):
    """Hold a results folder's lock: one run saves into it at a time, and compare.py reads it
    whole. Where the system has no such locks, or the folder is read-only, nothing is held."""
    try:
        import fcntl
        fd = os.open(os.path.join(folder, LOCK), os.O_RDWR | os.O_CREAT, 0o666)
    except (ImportError, OSError):
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            note(f"waiting for another run to finish with {folder}/")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def finish_replacing(folder):
    """Under the lock: finish the renames of a save that was killed halfway (its journal lists
    them, and every file it names was whole before the first rename), then remove stray temps."""
    journal = os.path.join(folder, JOURNAL)
    with contextlib.suppress(OSError, ValueError):
        with open(journal) as f:
            renames = json.load(f)
        for name, temp in renames.items():
            with contextlib.suppress(FileNotFoundError):
                os.replace(os.path.join(folder, temp), os.path.join(folder, name))
    with contextlib.suppress(FileNotFoundError):
        os.unlink(journal)
    for name in os.listdir(folder):
        if name.startswith(TEMP):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(folder, name))


def _write_temp(folder, name, content):
    """content (text, or a function that writes at a path) in a new temp file: -> its name."""
    while True:  # made as open() makes a file, with the umask's permissions (mkstemp's are 0600)
        path = os.path.join(folder, TEMP + secrets.token_hex(8) + os.path.splitext(name)[1])
        with contextlib.suppress(FileExistsError):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            break
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        if callable(content):
            content(path)
        else:
            f.write(content)
        f.flush()
        os.fsync(f.fileno())
    return os.path.basename(path)


def replace_together(folder, files):
    """Write {name: content} into folder as one unit: whatever happens (a full disk, Ctrl-C, a
    kill), every file is either new or as it was, all of them. Every file is written to a temp
    file first; then a journal lists the renames, the renames follow, and the journal goes. A save
    killed during the renames is finished by the next one (or by compare.py), as the journal says;
    SIGINT and SIGTERM wait for the renames."""
    with locked(folder):
        finish_replacing(folder)
        temps = {}
        try:
            for name, content in files.items():
                temps[name] = _write_temp(folder, name, content)
            journal = _write_temp(folder, JOURNAL, json.dumps(temps))
            with held_signals():
                os.replace(os.path.join(folder, journal), os.path.join(folder, JOURNAL))
                for name, temp in temps.items():
                    os.replace(os.path.join(folder, temp), os.path.join(folder, name))
                os.unlink(os.path.join(folder, JOURNAL))
        finally:
            finish_replacing(folder)  # nothing half done is left: temps of a failed save go


def save(folder, files):
    """Write files into folder as one unit; on failure say so on stderr and return 1 (the tables
    were printed; earlier results stay as they were)."""
    made = not os.path.isdir(folder)
    try:
        os.makedirs(folder, exist_ok=True)
        replace_together(folder, files)
    except (OSError, ValueError) as e:
        with contextlib.suppress(OSError):
            if made and os.listdir(folder) in ([], [LOCK]):  # this run made it, for nothing
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(folder, LOCK))
                os.rmdir(folder)
        print(f"error: could not save results to {folder}/: {e}", file=sys.stderr)
        return 1
    print(f"saved {', '.join(os.path.join(folder, name) for name in files)}", file=sys.stderr)
    return 0


# ---------------------------------------------------------------------------------------------
# reading a saved result


def load(path, script):
    """A result file's data, or raise ValueError with what is wrong with it, in a few words."""
    try:
        if not os.path.isfile(path) or os.path.getsize(path) > FILE_MAX:
            raise ValueError("is not a results file" if os.path.exists(path) else
                             "does not exist")
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise ValueError(f"cannot be read ({e.strerror or e})") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"is not JSON ({e.msg}, line {e.lineno})") from None
    if not isinstance(data, dict):
        raise ValueError("is not a result file (no object at the top)")
    version = data.get("schema_version")
    if "schema_version" not in data:
        raise ValueError("has no schema version; rerun that script to refresh it")
    if type(version) is not int:
        raise ValueError(f"has schema version {version!r}, which is not a whole number")
    if version not in READABLE:
        age = "older" if version < min(READABLE) else "newer"
        raise ValueError(f"has schema version {version}, {age} than this suite reads "
                         f"({', '.join(map(str, READABLE))}); rerun that script to refresh it")
    if data.get("script") != script:
        raise ValueError(f"holds results of {data.get('script')!r}, not {script!r}")
    check_machine(data.get("machine"))
    check_tables(data.get("tables"))
    return upgrade(data)


MACHINE = {"cpu": str, "os": str, "python": str, "numpy": str, "blas": list, "env": dict,
           "date": str}  # what the machine line needs; the rest may be missing or None
BLAS = {"library": str, "version": str, "threads": int}


def check_machine(m):
    """Raise ValueError, naming the field, if the machine line cannot be made from m."""
    if not isinstance(m, dict):
        raise ValueError("has no machine")
    for field, kind in MACHINE.items():
        if not isinstance(m.get(field), kind):
            raise ValueError(f"has no usable machine {field!r}")
    for b in m["blas"]:
        if not isinstance(b, dict) or not all(isinstance(b.get(k), t) for k, t in BLAS.items()):
            raise ValueError("has a BLAS entry without its library, version or threads")
    if not isinstance(m.get("cores"), (int, type(None))):
        raise ValueError("has no usable machine 'cores'")
    sweep = m.get("sweep")
    if sweep is not None and not (isinstance(sweep, list) and all(type(n) is int for n in sweep)):
        raise ValueError("has a thread sweep that is not a list of thread counts")


def check_tables(tables):
    """Raise ValueError, naming the table, if a table is not columns and rows of that width."""
    if not isinstance(tables, dict):
        raise ValueError("has no tables")
    for name, t in tables.items():
        columns = t.get("columns") if isinstance(t, dict) else None
        if not isinstance(columns, list) or not all(
                isinstance(c, dict) and isinstance(c.get("header"), str)
                and isinstance(c.get("unit"), str) for c in columns):
            raise ValueError(f"has a table {name!r} without usable columns")
        rows = t.get("rows")
        if not isinstance(rows, list) or not all(
                isinstance(r, list) and len(r) == len(columns) for r in rows):
            raise ValueError(f"has a table {name!r} whose rows do not match its columns")


OLD_FIGURES = {  # schema 1 and 2: which timing behind each figure, table by table
    "machine_speed": lambda s, i: {"memory speed": [[-1, s["forklift"]]],
                                   "read time": [[1, s["forklift"]]],
                                   "math speed": [[-1, s["workbench"]]],
                                   "math time": [[1, s["workbench"]]],
                                   "balance": [[1, s["forklift"]], [-1, s["workbench"]]],
                                   "tokens a trip needs": [[1, s["forklift"]],
                                                           [-1, s["workbench"]]]},
    "collision": lambda s, i: {"normal gap ms": [[1, s[0]]], "all at once gap ms": [[1, s[1]]],
                               "chunked worst gap ms": [[1, s[2]]]},
    "dial": lambda s, i: {"worst gap ms": [[1, s[i]]]},
    "cube": lambda s, i: {"h**3 ms": [[1, s[i][0]]], "h*h*h ms": [[1, s[i][1]]],
                          "ratio": [[1, s[i][0]], [-1, s[i][1]]]},
}


def upgrade(data):
    """A result of an older schema in the newest layout: samples_s[row][header] = [[power,
    samples]]. Older files kept one list of samples per row (or per figure, or per name)."""
    if data["schema_version"] >= 3:
        return data
    for name, t in data["tables"].items():
        old, base = t.get("samples_s"), name.split(" @")[0]
        if old is None:
            continue
        units = {c["header"]: c["unit"] for c in t["columns"]}
        per_row = {h: (1 if u in ("ms", "s") else -1) for h, u in units.items()
                   if u in ("ms", "s") or u.endswith("/s")}  # prefill, decode, depth
        with contextlib.suppress(KeyError, IndexError, TypeError):
            t["samples_s"] = [OLD_FIGURES[base](old, i) if base in OLD_FIGURES else
                              {h: [[p, old[i]]] for h, p in per_row.items()}
                              for i in range(len(t["rows"]))]
    return data


def read_roofs(path):
    """The two speeds of a saved machine_speed.json: {"bytes_per_s", "flops_per_s", "source"},
    each finite and above 0 (they divide every limit); or raise ValueError saying why not."""
    data = load(path, "machine_speed")
    speeds = data.get("roofs")
    if not isinstance(speeds, dict):
        raise ValueError("has no saved speeds ('roofs'): rerun machine_speed.py to save them")
    roofs = {}
    for name, what, unit in (("bytes_per_s", "memory speed", "GB/s"),
                             ("flops_per_s", "math speed", "GFLOP/s")):
        value = speeds.get(name)
        if type(value) not in (int, float) or not math.isfinite(value) or value <= 0:
            shown = f"{value / 1e9:g} {unit}" if type(value) in (int, float) else repr(value)
            raise ValueError(f"holds a {what} of {shown}: it must be a finite number above 0")
        roofs[name] = float(value)
    date = data["machine"]["date"][:10]
    return {**roofs, "source": f"from {path} (measured {date})"}
