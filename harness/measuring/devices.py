"""Where the arrays live: NumPy's (the default, the post's), or PyTorch's or CuPy's on a device
they name, each imported only when asked. A Device makes arrays there, waits for the device
(a GPU runs ahead of Python: every timed region ends by synchronising), and says what it is.

    python two_phases.py --device torch:cuda     # an NVIDIA GPU; torch:mps on an Apple laptop
    python two_phases.py --device torch:cpu      # PyTorch on this CPU: the same tables
"""
import dataclasses
import functools
import os
import time

import numpy as np

LIBRARIES = {"numpy": ("cpu",), "torch": ("cpu", "cuda", "mps"), "cupy": ("cuda",)}
INSTALL = "pip install -r requirements-gpu.txt"  # the GPU libraries' own requirements


@dataclasses.dataclass(frozen=True)
class Device:
    """An array library on one device: its name as given ('numpy', 'torch:cuda'), the library
    module, its array API namespace, and the device object it takes (None for NumPy)."""
    name: str
    library: object
    xp: object
    device: object = None

    @property
    def numpy(self):
        return self.device is None

    def asarray(self, a):
        """A NumPy array (float32) as this device's array, copied there."""
        return a if self.numpy else self.xp.asarray(a, device=self.device, copy=True)

    def tables(self, floors):
        """A model's tables ([{name: NumPy array}], one dict per floor) copied to this device."""
        return floors if self.numpy else [{k: self.asarray(t) for k, t in f.items()}
                                          for f in floors]

    def to_numpy(self, a):
        """An array of this device's as NumPy's (copied back from a GPU)."""
        if self.numpy:
            return a
        a = a.cpu() if hasattr(a, "cpu") else a
        return a.get() if hasattr(a, "get") else np.asarray(a)

    def concat(self, arrays, axis):
        """Arrays joined along an axis, on this device."""
        return np.concatenate(arrays, axis) if self.numpy else self.xp.concat(arrays, axis=axis)

    def threads(self, n):
        """Hold the library's own CPU threads to n (--threads), where it runs on this CPU."""
        if n and self.library.__name__ == "torch" and self.device.type == "cpu":
            self.library.set_num_threads(n)

    def synced(self, fn):
        """fn, returning once the device has done it: what a timer may time (NumPy's: fn)."""
        if self.numpy:
            return fn

        def done():
            out = fn()
            self.sync()
            return out
        return done

    def sync(self):
        """Wait until the device has done what it was given."""
        if self.numpy:
            return
        if self.library.__name__ == "torch":
            kind = self.device.type
            if kind == "cuda":
                self.library.cuda.synchronize(self.device)
            elif kind == "mps":
                self.library.mps.synchronize()
        else:  # CuPy
            self.library.cuda.Device().synchronize()

    def clock(self):
        """time.perf_counter() once the device has caught up: a timed region's two ends."""
        self.sync()
        return time.perf_counter()

    def facts(self):
        """{"device", "library", "memory_bytes", "driver"} for the machine line; None: NumPy's."""
        if self.numpy:
            return None
        lib, kind = self.library, getattr(self.device, "type", "cuda")
        out = {"device": self.name, "library": f"{lib.__name__} {lib.__version__}",
               "memory_bytes": None, "driver": None, "name": kind}
        if lib.__name__ == "torch" and kind == "cuda":
            props = lib.cuda.get_device_properties(self.device)
            out.update(name=props.name, memory_bytes=props.total_memory,
                       driver=f"CUDA {lib.version.cuda}")
        elif lib.__name__ == "torch" and kind == "mps":
            out.update(name="Apple GPU (mps)")
        elif lib.__name__ == "torch":
            out.update(name="this CPU, through PyTorch")
        elif lib.__name__ == "cupy":
            dev = lib.cuda.Device()
            free, total = dev.mem_info
            out.update(name=lib.cuda.runtime.getDeviceProperties(dev.id)["name"].decode(),
                       memory_bytes=total, driver=f"CUDA {lib.cuda.runtime.runtimeGetVersion()}")
        return out


NUMPY = Device("numpy", np, np)


@functools.lru_cache(maxsize=None)
def device(text):
    """The Device `--device` names: numpy, torch:cpu, torch:cuda, torch:mps or cupy:cuda (a
    library alone: its first device); or raise ValueError in one line (a library not
    installed, a device it does not have here)."""
    name, _, kind = text.partition(":")
    if name not in LIBRARIES or (kind and kind not in LIBRARIES[name]):
        raise ValueError("must be " + ", ".join(f"{lib}:{d}" if lib != "numpy" else lib
                                                for lib, kinds in LIBRARIES.items()
                                                for d in kinds) + f", got {text[:40]!r}")
    if name == "numpy":
        return NUMPY
    kind = kind or LIBRARIES[name][0]
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # PyTorch's CPU threads sleep between
    #   its calls instead of spinning, leaving the cores to NumPy and the rest of the run
    try:
        library = __import__(name)
        import array_api_compat
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
    else:
        try:
            if library.cuda.runtime.getDeviceCount() < 1:
                raise RuntimeError
        except Exception:
            raise ValueError(f"{text}: CuPy finds no CUDA device here") from None
        where = library.cuda.Device()
    return Device(f"{name}:{kind}", library, array_api_compat.array_namespace(
        library.zeros(1, device=where) if name == "torch" else library.zeros(1)), where)
