"""The machinery the scripts share: flags, timing, records, printers, saving, judging, drawing."""
import os

# Idle threads that spin take a core from whatever is timed next. OpenBLAS's spin for 2**28
# clock ticks (about 0.1 s) after each call: a trip timed just after the forklift's read took
# twice its time. Numba's OpenMP threads spin 300,000 times: the forklift's read just after a
# trip went at 0.6x its speed. These keep them awake between the calls of one trip or chain
# (2**16 ticks, 10,000 spins: tens of microseconds), asleep soon after. Set before NumPy and
# Numba load their threads (every script imports this package first); a user's own stay.
SPIN = {"OPENBLAS_THREAD_TIMEOUT": "16", "GOMP_SPINCOUNT": "10000"}
for _name, _value in SPIN.items():
    os.environ.setdefault(_name, _value)
