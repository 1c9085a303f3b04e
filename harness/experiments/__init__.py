"""The model's experiments, a module each, in the post's order: its plan (the rows, what rides
each trip), its trials (how a round measures them), its figures (what its records hold) and its
sheets (what they print), declared once as EXPERIMENT (plans.Experiment); the post's claims
judged from its figures (CLAIMS) and its picture (PICTURE), where it has them. two_phases.py names
which run; harness/model_run.py runs any of them; --predict and the memory check read the same
plans; told.py gathers the claims (claims.py) and pictures in the post's order for the stages that
judge and place them."""

SEED = 0  # the tokens' seeds: SEED + 1 the typers' question, + 2 a reading's, + 3 the typed
#           tokens, + 4 and + 5 the newcomer's question and first word (the tables take --seed)
