"""The house's imports flow one way: every room (a top-level file, engine/, or one of harness/'s
files and folders) imports only rooms on the floors below it, and no files import each other in a
circle, so that a newcomer can read and change a room knowing only what lies under it. Every
import is walked, those inside functions too."""
import ast
import os

from conftest import ROOT

FLOORS = (  # lowest first: a room may import the rooms listed before it, never one after
    "accounting", "harness/terminal", "model", "engine", "harness/datasheets", "harness/post",
    "harness/stopping", "harness/measuring", "harness/keeping", "harness/flags",
    "harness/judging", "harness/showing", "compare", "harness/predicting", "harness/experiments",
    "harness/runner", "cube_bug", "harness/model_run", "harness/self_check", "machine_speed",
    "two_phases")
APART = {"tests", "references", "results", ".venv", ".ci", ".git"}  # not rooms of the suite


def modules():
    """{dotted module name: its file} of the suite's own code."""
    found = {}
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in APART and not d.startswith((".", "__"))]
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                dotted = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                found[dotted.removesuffix(".__init__")] = path
    return found


def room(module):
    """harness.keeping.results -> harness/keeping; engine.kernels -> engine; model -> model."""
    parts = module.split(".")
    return "/".join(parts[:2]) if parts[0] == "harness" and len(parts) > 1 else parts[0]


def imports(found):
    """{module: the suite's modules it imports}, an import of a package's name read as its
    module where the package holds one by that name (from harness import flags: harness.flags)."""
    edges = {}
    for module, path in found.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        named = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                named.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                named.update(f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in found
                             else node.module for a in node.names)
        edges[module] = {n for n in named if n in found and n != module}
    return edges


def test_every_room_imports_only_the_floors_below_it():
    found = modules()
    assert {room(m) for m in found} - {"harness"} <= set(FLOORS), "a new room: place it in FLOORS"
    up = [f"{found[a]} -> {found[b]}" for a, bs in imports(found).items() for b in bs
          if "harness" not in (room(a), room(b)) and room(a) != room(b)
          and FLOORS.index(room(b)) > FLOORS.index(room(a))]
    assert not up, "imports that point up a floor:\n" + "\n".join(sorted(up))


def test_no_files_import_each_other_in_a_circle():
    edges, circles = imports(modules()), []
    done, path = set(), []

    def walk(m):  # depth first: a module met again on the path closes a circle
        if m in path:
            circles.append(" -> ".join(path[path.index(m):] + [m]))
            return
        if m in done:
            return
        path.append(m)
        for n in sorted(edges[m]):
            walk(n)
        path.pop()
        done.add(m)
    for m in sorted(edges):
        walk(m)
    assert not circles, "files that import each other in a circle:\n" + "\n".join(circles)


def test_the_walk_sees_an_import_up_a_floor_and_a_circle(tmp_path, monkeypatch):
    """The two checks above fail where they should: in a copy of a small house, an import inside
    a function that points up a floor, and two files that import each other."""
    for name, text in {"model.py": "def f():\n    import two_phases\n",
                       "two_phases.py": "import model\n",
                       "accounting.py": "import compare\n", "compare.py": "import accounting\n"
                       }.items():
        (tmp_path / name).write_text(text)
    monkeypatch.setattr(__import__(__name__), "ROOT", str(tmp_path))
    found = modules()
    assert imports(found)["model"] == {"two_phases"}
    try:
        test_every_room_imports_only_the_floors_below_it()
    except AssertionError as e:
        assert "model.py ->" in str(e) and "accounting.py ->" in str(e)
    else:
        raise AssertionError("an import up a floor passed")
    try:
        test_no_files_import_each_other_in_a_circle()
    except AssertionError as e:
        assert "accounting -> compare -> accounting" in str(e)
    else:
        raise AssertionError("a circle passed")


def test_every_file_reads_in_one_sitting():
    """No file of the suite over 450 lines but the compiled kernels' (one switch of every
    width's tiles); the post's model under 300."""
    long = {path: n for path in modules().values() if (n := sum(1 for _ in open(path))) > 450
            and os.path.relpath(path, ROOT) != os.path.join("engine", "kernels.py")}
    assert not long, f"files over 450 lines: {long}"
    assert sum(1 for _ in open(os.path.join(ROOT, "model.py"))) < 300
