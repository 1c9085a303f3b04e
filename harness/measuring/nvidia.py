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


def smi(*arguments):
    """nvidia-smi's CSV lines (no header, no units), or None where it is not installed or fails."""
    found = shutil.which("nvidia-smi")
    if found is None:
        return None
    try:
        done = subprocess.run([found, *arguments, "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return [[cell.strip() for cell in line.split(",")] for line in done.stdout.splitlines()
            if line.strip()]


def which(uuid):
    """nvidia-smi's -i for a GPU: its UUID (the same whatever CUDA_VISIBLE_DEVICES renumbers),
    else the first GPU."""
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
    """The other processes computing on the GPU: [(pid, memory in MiB)], leaving out this run's
    own (this process, the one that started it, and `ours`); None where nvidia-smi is not here."""
    lines = smi("--query-compute-apps=pid,gpu_uuid,used_memory")
    if lines is None:
        return None
    mine = {os.getpid(), os.getppid(), *ours}
    want = which(uuid) if uuid else None
    return [(int(pid), number(used)) for pid, gpu, used in (line[:3] for line in lines
                                                            if len(line) >= 3)
            if pid.isdigit() and int(pid) not in mine and (want is None or gpu == want)]


def busy_words(found):
    """'other work on the GPU: 2 processes (pid 4242, 1,024 MiB; ...)', or '' where none."""
    if not found:
        return ""
    listed = "; ".join(f"pid {pid}" + (f", {mib:,} MiB" if isinstance(mib, (int, float)) else "")
                       for pid, mib in found[:4])
    return (f"other work on the GPU: {len(found)} "
            f"{'process' if len(found) == 1 else 'processes'} ({listed})")
