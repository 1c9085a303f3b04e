"""The slow road (cube_bug.py's figures): the post's claims of h**3 against h*h*h, on numbers of
each sign and inside the model's reading and typing."""
from harness.judging.rules import (CUBE, NOT_PRINTED, SMALL, TIE, Claim, above, below, every,
                                   figure, no_less, within)


CUBE_WHY = ("h**3 takes NumPy's general power loop, whose speed depends on the NumPy build and "
            "the CPU (the post's: NumPy 2.5.3)")


def bug(t, trip):
    return figure(t, "bug", "power", trip=trip) / figure(t, "bug", "product", trip=trip)


def bug_in_reading(t, r):
    v = bug(t, "reading")
    return f"{v.value:.2f}x", above(v, 1.25, label="the ratio", fmt=".2f")


def bug_in_typing(t, r):
    v = bug(t, "typing")
    return f"{v.value:.2f}x", every(
        no_less(v, "h**3 ran faster", because="the difference is noise between the trips, not "
                                               "the bug"),
        below(v, 1.25, label="the ratio", fmt=".2f"))


def negatives(t, r):
    v = figure(t, "bug", "negative share", trip="reading")
    return f"{v.value:.0f}%", within(v, 40, 60, label="the share", fmt=".0f")


def cube(numbers, edge, slow):
    def judge(t, r):
        v = figure(t, "cube", "power", numbers=numbers) / figure(t, "cube", "product",
                                                                numbers=numbers)
        said = f"{v.value:.1f}x" if v.value < 10 else f"{v.value:.0f}x"
        return said, (above if slow else below)(v, edge, label="the ratio", fmt=".3g")
    return judge


# ---- why a ratio of two rows does not hold: which of the two is further over its limit
PLACE = 7  # its claims' place in the post's order (experiments/registry.py)

CLAIMS = [
    Claim("cube_bug", "h**3 is about 2x slower than h*h*h on positive numbers", "2x",
          "On positive numbers h**3 takes under 5x h*h*h's time: the slow road is the "
          "negatives'", cube("all positive", 5, slow=False), why=CUBE_WHY, needs=CUBE,
          fails_on="a NumPy whose power loop is slow for every sign"),
    Claim("cube_bug", "... about 109x on negative numbers", "109x", "On negative numbers "
          "h**3 takes 10x or more h*h*h's time: a slow road", cube("all negative", 10, True),
          why=CUBE_WHY, needs=CUBE, fails_on="a NumPy that cubes by multiplying (a fixed "
          "power loop)"),
    Claim("cube_bug", "... about 55x on a real mix", "55x", "On a mix of both (standard "
          "normals, half negative), 10x or more: half the numbers on the slow road slow the "
          "whole", cube("mixed (real)", 10, True), why=CUBE_WHY, needs=CUBE,
          fails_on="a NumPy that cubes by multiplying (a fixed power loop)"),
    Claim("cube_bug", "About half the numbers in a real model are negative", NOT_PRINTED,
          "40% to 60% of the numbers the model cubes, in its first floor reading the 256-token "
          "question, are negative", negatives, needs=CUBE, basis="accounting",
          fails_on="none: it is the model's numbers"),
    Claim("cube_bug", "With h**3 in the model, reading is about 2x slower", "about 2x",
          "A 256-token read with h**3 takes 1.25x or more its time with h*h*h", bug_in_reading,
          why=CUBE_WHY, needs=CUBE, fails_on="a NumPy that cubes by multiplying"),
    Claim("cube_bug", "... and typing barely slower", "barely", "One user's typing step with "
          f"h**3 takes under 1.25x its time with h*h*h, and is not faster by more than "
          f"{TIE:.0%} (one token is only 3,072 numbers a floor)", bug_in_typing, why=CUBE_WHY,
          needs=SMALL, fails_on="a machine whose power loop is so slow that 3,072 "
          "numbers a floor cost as much as the tables"),
]
