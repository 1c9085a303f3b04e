"""The model's experiments, a module each, in the post's order: its plan (the rows, what rides
each trip), its trials (how a round measures them), its figures (what its records hold) and its
sheets (what they print), declared whole once as EXPERIMENT (plans.Experiment: its flags too,
and its picture); the post's claims judged from its figures (CLAIMS). registry.py finds them
all, and every stage reads them there: two_phases.py offers them, harness/model_run.py runs
them, --predict and the memory check read the same plans."""

SEED = 0  # the tokens' seeds: SEED + 1 the typers' question, + 2 a reading's, + 3 the typed
#           tokens, + 4 and + 5 the newcomer's question and first word (the tables take --seed)
