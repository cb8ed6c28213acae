"""Tests lost or changed between two commits: a refactor must keep every test and its meaning.

    python tools/lost_tests.py BASE HEAD [--repo DIR] [--lost-only] [-v]

Reads tests/**/*.py at each commit with Python's ast, from git objects (no checkout, nothing run).
- LOST: a test function (test_*, methods keyed by Class.test_*) that BASE has more times than HEAD, wherever the
  file moved to; the first-parent commit of BASE..HEAD that dropped it is named, with the tests that commit added
  in the same module (a rename's candidates: read both).
- CHANGED: a top-level item of a test module (function, class, assignment such as a case table, decorators
  included) whose syntax tree at HEAD differs from BASE's, docstrings and formatting aside; looked up in the
  module of the same file name first, else anywhere under tests/ when its name is unique there. A unified diff
  of the two sources follows each. Items gone from HEAD that are not tests are listed as GONE (helpers).
Exits 1 if a test is lost or an item changed or gone (with --lost-only: if a test is lost), else 0.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import subprocess
import sys
from pathlib import PurePosixPath


class Repo:
    def __init__(self, path: str):
        self.path = path
        self._parsed: dict[str, ast.Module | None] = {}

    def git(self, *args: str) -> str:
        done = subprocess.run(["git", "-C", self.path, *args], capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"error: git {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def modules(self, commit: str) -> dict[str, ast.Module]:
        """tests/**/*.py at the commit, parsed (blobs parsed once across commits)."""
        out = {}
        for line in self.git("ls-tree", "-r", commit, "--", "tests/").splitlines():
            meta, path = line.split("\t", 1)
            blob = meta.split()[2]
            if not path.endswith(".py"):
                continue
            if blob not in self._parsed:
                try:
                    self._parsed[blob] = ast.parse(self.git("cat-file", "blob", blob))
                except SyntaxError:
                    self._parsed[blob] = None
            if self._parsed[blob] is not None:
                out[path] = self._parsed[blob]
        return out


def tests_in(modules: dict[str, ast.Module]) -> dict[str, list[str]]:
    """Test names (test_x or Class.test_x), each with the modules that hold it (once per copy)."""
    found: dict[str, list[str]] = {}
    for path, tree in modules.items():
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
                found.setdefault(node.name, []).append(path)
            elif isinstance(node, ast.ClassDef):
                for sub in node.body:
                    if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)) and sub.name.startswith("test"):
                        found.setdefault(f"{node.name}.{sub.name}", []).append(path)
    return found


def _strip_docstrings(node: ast.AST) -> ast.AST:
    node = ast.parse(ast.unparse(node)).body[0]  # a copy
    for n in ast.walk(node):
        body = getattr(n, "body", None)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and body:
            first = body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                n.body = body[1:] or [ast.Pass()]
    return node


def items_in(tree: ast.Module) -> dict[str, ast.AST]:
    """Top-level functions, classes and assignments of a module, by name ('=NAME' for assignments)."""
    out = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            out["=" + ast.unparse(target)] = node
    return out


def changed_items(base: dict[str, ast.Module], head: dict[str, ast.Module]) -> tuple[list[tuple[str, str, str]], list[str]]:
    """(label, base source, head source) for items whose tree changed, and labels of items gone from HEAD."""
    by_file: dict[str, list[dict[str, ast.AST]]] = {}
    by_name: dict[str, list[ast.AST]] = {}
    for path, tree in head.items():
        found = items_in(tree)
        by_file.setdefault(PurePosixPath(path).name, []).append(found)
        for name, node in found.items():
            by_name.setdefault(name, []).append(node)
    changed, gone = [], []
    for path, tree in sorted(base.items()):
        for name, node in items_in(tree).items():
            label = f"{path}::{name.lstrip('=')}"
            candidates = [found[name] for found in by_file.get(PurePosixPath(path).name, []) if name in found]
            if not candidates and len(by_name.get(name, [])) == 1:
                candidates = by_name[name]
            if not candidates:
                if not (name.startswith("test") or (isinstance(node, ast.ClassDef) and name.startswith("Test"))):
                    gone.append(label)  # tests gone are reported as lost
                continue
            mine = ast.dump(_strip_docstrings(node))
            if all(ast.dump(_strip_docstrings(c)) != mine for c in candidates):
                changed.append((label, ast.unparse(_strip_docstrings(node)), ast.unparse(_strip_docstrings(candidates[0]))))
    return changed, gone


def lost_tests(repo: Repo, base: str, head: str) -> list[tuple[str, int, str, list[str]]]:
    """(test name, copies lost, commit that dropped them, tests that commit added in the same modules: a rename's
    candidates) for tests HEAD has fewer times than BASE."""
    start, end = tests_in(repo.modules(base)), tests_in(repo.modules(head))
    lost = {name: len(paths) - len(end.get(name, [])) for name, paths in start.items() if len(end.get(name, [])) < len(paths)}
    if not lost:
        return []
    culprit: dict[str, tuple[str, list[str]]] = {}
    prev = start
    for commit in repo.git("rev-list", "--first-parent", "--reverse", f"{base}..{head}").split():
        now = tests_in(repo.modules(commit))
        for name in lost:
            if name not in culprit and len(now.get(name, [])) < len(prev.get(name, [])):
                where = {PurePosixPath(p).name for p in prev[name]}
                added = sorted(
                    t for t, paths in now.items() if len(paths) > len(prev.get(t, [])) and {PurePosixPath(p).name for p in paths} & where
                )
                culprit[name] = (repo.git("log", "-1", "--format=%h %s", commit).strip()[:90], added)
        prev = now
    return [(name, n, *culprit.get(name, ("?", []))) for name, n in sorted(lost.items())]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("base")
    ap.add_argument("head")
    ap.add_argument("--repo", default=".", help="the git repository (default: the current directory)")
    ap.add_argument("--lost-only", action="store_true", help="exit 1 only for lost tests; still list the changes")
    ap.add_argument("-v", "--verbose", action="store_true", help="show the diff of each changed item")
    args = ap.parse_args(argv)
    repo = Repo(args.repo)
    base, head = (repo.git("rev-parse", "--verify", f"{c}^{{commit}}").strip() for c in (args.base, args.head))
    lost = lost_tests(repo, base, head)
    base_mods, head_mods = repo.modules(base), repo.modules(head)
    changed, gone = changed_items(base_mods, head_mods)
    for name, n, commit, added in lost:
        print(f"LOST {name}" + (f" ({n} copies)" if n > 1 else "") + f": dropped by {commit}")
        if added:
            print(f"    the same commit added, in the same module: {', '.join(added)} (a rename? read both)")
    for label in gone:
        print(f"GONE {label}")
    for label, old, new in changed:
        print(f"CHANGED {label}")
        if args.verbose:
            for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=1):
                if not line.startswith(("---", "+++")):
                    print(f"    {line}")
    n_base, n_head = (sum(map(len, tests_in(mods).values())) for mods in (base_mods, head_mods))
    print(
        f"{len(lost)} tests lost, {len(changed)} items changed, {len(gone)} helpers gone; "
        f"test functions {n_base} at {base[:10]}, {n_head} at {head[:10]}"
    )
    return 1 if lost or (not args.lost_only and (changed or gone)) else 0


if __name__ == "__main__":
    sys.exit(main())
