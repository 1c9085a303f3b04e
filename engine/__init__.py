"""The model's engine: how model.py's math runs where the fastest way depends on the CPU. The
table products in blocks and the ways handed to the model (blocks.py), the threads that share
one op's work (pool.py), and Numba's compiled kernels for trips of a few tokens (compiled.py,
which loads kernels.py only where Numba runs). Each is optional and chosen by measuring where
the suite runs (harness/measuring/tuning.py); without any of them the model is plain NumPy."""
