"""What nvidia-smi says of an NVIDIA GPU, where it is installed: the facts a GPU engineer reads
first (driver, clocks, power limit, temperature, MIG and persistence mode) for the machine line,
and the other processes computing on the GPU, watched as other work on the CPU's cores is."""
import os
import shutil
import subprocess

QUERY = {  # nvidia-smi's field: the fact's name on the machine line and in the records
    "driver_version": "driver", "clocks.sm": "sm_mhz", "clocks.max.sm": "max_sm_mhz",
    "clocks.mem": "memory_mhz", "power.limit": "power_limit_w", "temperature.gpu": "celsius",
    "mig.mode.current": "mig", "persistence_mode": "persistence", "utilization.gpu": "busy_pct"}
TIMEOUT_S = 10
BUSY_PCT = 10  # a GPU this busy as a run starts, with processes it cannot see, is other work's


def smi(*arguments, csv=True):
    """nvidia-smi's CSV lines (no header, no units), or its plain lines (csv=False), or None
    where it is not installed or fails."""
    found = shutil.which("nvidia-smi")
    if found is None:
        return None
    try:
        done = subprocess.run([found, *arguments, *(["--format=csv,noheader,nounits"] if csv
                                                    else [])],
                              capture_output=True, text=True, timeout=TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    return [[cell.strip() for cell in line.split(",")] for line in lines] if csv else lines


def whole_gpu(mig):
    """The UUID of the GPU a MIG slice is part of (nvidia-smi -L lists each GPU, then its
    slices): its process list names the whole GPU's, never the slice's; None where unknown."""
    gpu = None
    for line in smi("-L", csv=False) or ():
        uuid = line.rpartition("UUID: ")[2].rstrip(")").strip()
        if uuid.startswith("GPU-"):
            gpu = uuid
        elif uuid == mig:
            return gpu
    return None


def which(uuid):
    """nvidia-smi's -i for a GPU: its UUID (the same whatever CUDA_VISIBLE_DEVICES renumbers;
    'MIG-...' for a slice, devices.uuid_of), else the first GPU."""
    if not uuid:
        return "0"
    uuid = str(uuid)
    return uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"


def facts(uuid=None):
    """{fact: value} of QUERY for the GPU (numbers as numbers; "[N/A]" as None), or None where
    nvidia-smi is not here."""
    lines = smi(f"--query-gpu={','.join(QUERY)}", "-i", which(uuid))
    if not lines or len(lines[0]) != len(QUERY):
        return None
    return {name: number(cell) for name, cell in zip(QUERY.values(), lines[0])}


def number(cell):
    if cell in ("", "[N/A]", "N/A", "[Not Supported]"):
        return None
    try:
        value = float(cell)
    except ValueError:
        return cell
    return int(value) if value.is_integer() else value


def words(f):
    """The facts as the machine line says them: 'driver 550.54.15, SM 1980 of 1980 MHz, power
    limit 700 W, 34 C, persistence Enabled, MIG Disabled', or ''."""
    if not isinstance(f, dict):
        return ""
    parts = [f"driver {f['driver']}" if f.get("driver") else "",
             f"SM {f['sm_mhz']} of {f['max_sm_mhz']} MHz" if f.get("sm_mhz") and
             f.get("max_sm_mhz") else "",
             f"power limit {f['power_limit_w']:.0f} W" if isinstance(f.get("power_limit_w"),
                                                                     (int, float)) else "",
             f"{f['celsius']} C" if f.get("celsius") is not None else "",
             f"persistence {f['persistence']}" if f.get("persistence") else "",
             f"MIG {f['mig']}" if f.get("mig") else ""]
    return ", ".join(p for p in parts if p)


def others(uuid=None, ours=()):
    """The other processes computing on the GPU that this run can see: [(pid, memory in
    MiB)], leaving out its own (census); None where nvidia-smi is not here."""
    found = census(uuid, ours)
    return None if found is None else found["others"]


def census(uuid=None, ours=()):
    """nvidia-smi's processes on the GPU, sorted: {"others": [(pid, MiB)] other work this run
    can see; "unseen": those it cannot (the driver gives the host's PIDs: in a container, this
    run's own and another container's alike), never counted as busy}; None without
    nvidia-smi. This run's own: this process and its parent under every PID namespace it shows
    (NSpid), `ours`, and any child of this process (a worker)."""
    lines = smi("--query-compute-apps=pid,gpu_uuid,used_memory")
    if lines is None:
        return None
    mine = {*namespaced(os.getpid()), *namespaced(os.getppid()), *ours}
    want = which(uuid) if uuid else None
    if want and want.startswith("MIG-"):  # its processes are listed under the whole GPU's
        want = whole_gpu(want) or want  #     UUID: every slice's (this one's among them)
    found = {"others": [], "unseen": []}
    for pid, gpu, used in (line[:3] for line in lines if len(line) >= 3):
        if not pid.isdigit() or int(pid) in mine or (want is not None and gpu != want):
            continue
        seen = os.path.exists(f"/proc/{pid}")  # a PID of this namespace, or none of it
        if seen and parent(int(pid)) == os.getpid():
            continue  # a worker of this run
        found["others" if seen else "unseen"].append((int(pid), number(used)))
    return found


def namespaced(pid):
    """A process's PIDs in every namespace /proc shows it in (its status's NSpid), or {pid}."""
    try:
        with open(f"/proc/{pid}/status") as f:
            said = next((line.split()[1:] for line in f if line.startswith("NSpid:")), [])
    except OSError:
        said = []
    return {int(p) for p in said if p.isdigit()} | {pid}


def parent(pid):
    """A process's parent's PID, as /proc says it; None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(line.split()[1]) for line in f if line.startswith("PPid:")), None)
    except (OSError, ValueError):
        return None


def unseen_words(found):
    """'2 processes on the GPU that this run cannot see (pid 4242, 20,480 MiB; ...)', or ''."""
    return f"{counted(found)} on the GPU that this run cannot see ({listed(found)})" \
        if found else ""


def busy_words(found):
    """'other work on the GPU: 2 processes (pid 4242, 1,024 MiB; ...)', or '' where none."""
    return f"other work on the GPU: {counted(found)} ({listed(found)})" if found else ""


def counted(found):
    return f"{len(found)} {'process' if len(found) == 1 else 'processes'}"


def listed(found):
    """'pid 4242, 1,024 MiB; pid 4343': the first four processes found."""
    return "; ".join(f"pid {pid}" + (f", {mib:,} MiB" if isinstance(mib, (int, float)) else "")
                     for pid, mib in found[:4])
