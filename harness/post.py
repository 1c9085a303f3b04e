"""The post's experiment, as its own settings: the sizes its tables were measured at, defined once
for the scripts that measure them and the claims judged on them."""
import dataclasses

SIZE = 10_000  # machine_speed: the forklift's 10,000 x 10,000 float32 table, 400 MB
MATMUL = 2048  # ... and the workbench's two 2048 x 2048 tables
MODEL = "small"  # GPT-2 small: 12 floors, width 768
PROMPTS = (1, 16, 64, 256, 1024)  # Phase 1: question lengths, one user
USERS = (1, 4, 16, 64)  # Phase 2: users typing one token each in the same trip
NOTES = 512  # notes already in each typer's notebook
TYPERS = 8  # the collision: 8 users typing ...
QUESTION = 1024  # ... when a new user arrives with a 1,024-token question
CHUNK = 128  # chunked prefill: question tokens read per step, the post's third line
CUBE_TOKENS = 256  # cube_bug: one floor's worth of numbers for a 256-token question


@dataclasses.dataclass(frozen=True)
class Told:
    """What the post tells, as the suite judges and draws it: its claims in the post's order
    (judging/rules.Claim) and its pictures in the order the report places them
    (showing/pictures.Drawing). Gathered at the top (experiments/registry.py) and handed to every
    stage that judges or places them."""
    claims: tuple
    drawings: tuple = ()

    def drawing(self, name):
        """The Drawing saved as file `name` (roofline.png, ...)."""
        return next(d for d in self.drawings if d.name == name)
