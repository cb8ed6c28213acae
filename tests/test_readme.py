"""The README and every page in docs/ are true: their Python blocks run, their command lines parse
with the real CLI parser (and run, where that is cheap), and the tools, files and pages they name
exist. A new docs/*.md is picked up automatically."""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from cases import Case, make_model
from conftest import load_tool, ovrnn_cli

from ovrnn import cli

ROOT = Path(__file__).resolve().parent.parent
PAGES = {p.relative_to(ROOT).as_posix(): p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]}
README = PAGES["README.md"]
FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```", re.S | re.M)


def blocks(language: str, text: str | None = None) -> list[str]:
    """The fenced blocks of one language, in one page or in all of them."""
    out = []
    for page in [text] if text is not None else PAGES.values():
        for indent, lang, body in FENCE.findall(page):
            if lang == language:
                out.append("\n".join(line[len(indent) :] for line in body.splitlines()))
    return out


def command_lines(text: str) -> list[str]:
    """Shell lines, with backslash continuations joined."""
    return [ln.strip() for ln in text.replace("\\\n", " ").splitlines() if ln.strip() and not ln.strip().startswith("#")]


def ovrnn_commands() -> list[str]:
    """Every `ovrnn ...` line of the sh blocks (after `&&`), and every inline `ovrnn ...` span, in
    the README and every docs page."""
    found = []
    for block in blocks("sh"):
        for line in command_lines(block):
            for part in line.split("&&"):
                part = part.split("  #")[0].strip()
                if part.startswith("ovrnn "):
                    found.append(part)
    for text in PAGES.values():
        found += list(re.findall(r"`(ovrnn [^`]+)`", text))
    return found


def options_of(command: str) -> set[str]:
    parser = cli.build_parser()
    sub = cli.subparser(parser, command)
    return {o for a in sub._actions for o in a.option_strings}


@pytest.mark.parametrize("page", [p for p in PAGES if blocks("python", PAGES[p])] or ["README.md"])
def test_python_blocks_run(page, tmp_path):
    python = blocks("python", PAGES[page])
    assert python, f"{page} has Python examples"
    for i, code in enumerate(python):
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300)
        assert proc.returncode == 0, f"{page} python block {i} fails:\n{proc.stderr}"
        # what the comments say a line prints is what it prints (a value, or a message; a trailing
        # "(...)" after a value is prose)
        for comment in re.findall(r"^\s*print\(.*\)\s+# (.*)$", code, re.M):
            if re.match(r"[\[{(\d'\"]|True|False|None|input '", comment):
                expected = re.sub(r"(?<=\S) \([^()]*\)$", "", comment.strip())
                assert expected in proc.stdout, (page, expected, proc.stdout)


def test_the_readme_is_within_15_kb():
    """Issue 32: the README says what the tool does and how to start; the detail lives in docs/."""
    size = len((ROOT / "README.md").read_bytes())
    assert size <= 15_000, f"README.md is {size:,} bytes (at most 15,000: move detail into a docs/ page)"


def test_every_docs_page_is_linked_from_the_readme():
    """A newcomer finds every reference page from the README."""
    linked = set(re.findall(r"\]\((docs/[\w.-]+\.md)", README))
    assert {p for p in PAGES if p.startswith("docs/")} <= linked


def test_every_ovrnn_command_uses_real_flags():
    commands = ovrnn_commands()
    assert len(commands) >= 10
    subcommands = {"convert", "run", "validate", "inspect", "devices", "demo"}
    for line in commands:
        words = line.split()
        if words[1].startswith("--"):  # ovrnn --version
            assert words[1] in {"--version", "--help"}, line
            continue
        assert words[1] in subcommands, line
        flags = set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", " ".join(words[2:])))
        unknown = flags - options_of(words[1])
        assert not unknown, f"`{line}` uses {sorted(unknown)}, which `ovrnn {words[1]}` does not take"


def is_concrete(line: str) -> bool:
    """No [optional] part, no `a|b` choice and no placeholder such as MODEL.onnx, OUT.xml or N."""
    tokens = shlex.split(line)
    for i, token in enumerate(tokens):
        if i and tokens[i - 1] == "--input":
            continue
        if "[" in token or "|" in token or re.search(r"\b(MODEL|OUT|IR|DIR|FILE|NAME|N)\b", token):
            return False
    return True


def names_its_file(line: str) -> bool:
    """`ovrnn convert model.onnx ...` is a command; `ovrnn convert --compress-weights int8` in prose
    names a flag of the command (its flags are still checked above)."""
    words = line.split()
    return words[1] in ("demo", "devices") or (len(words) > 2 and not words[2].startswith("-"))


def test_concrete_commands_parse_with_the_real_parser():
    # a bare `ovrnn run` in prose names the command; `ovrnn demo` and longer lines are commands
    concrete = [
        c
        for c in ovrnn_commands()
        if is_concrete(c) and not c.split()[1].startswith("--") and (len(c.split()) > 2 or c == "ovrnn demo") and names_its_file(c)
    ]
    assert len(concrete) >= 4, concrete
    for line in concrete:
        cli.parse_args(shlex.split(line)[1:])  # raises UsageError on a flag or value the CLI refuses


def test_whole_model_and_ovms_commands_run(tmp_path):
    """The whole-model and OVMS command lines (docs/whole_models.md, docs/serving.md), run as written on stand-in models."""
    shutil.copy(ROOT / "tests" / "fixtures" / "rnn_embedding_classifier.onnx", tmp_path / "rnn_classifier.onnx")
    model, _, _ = make_model(Case("readme", direction="bidirectional"))
    onnx.save(model, tmp_path / "model.onnx")
    ran = 0
    for line in ovrnn_commands():
        if ("rnn_classifier.onnx" in line or "out/classifier.xml" in line or "--ovms-repo models" in line) and is_concrete(line):
            proc = ovrnn_cli(*shlex.split(line)[1:], cwd=tmp_path)
            assert proc.returncode == 0, f"`{line}`: {proc.stderr}"
            ran += 1
    assert ran >= 4
    assert (tmp_path / "models" / "rnn_chain" / "1" / "model.xml").is_file()


@pytest.mark.parametrize("page", list(PAGES))
def test_tools_paths_and_links_named_exist(page):
    text, here = PAGES[page], (ROOT / page).parent
    for tool in re.findall(r"python (tools/\w+\.py)", text):
        assert (ROOT / tool).is_file(), tool
    for path in re.findall(r"`((?:ovrnn|tests|tools|docs|ir_templates)/[\w./]+)`", text):
        assert (ROOT / path).exists(), path
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[\w-]+)?\)", text):  # relative links: pages and pictures
        if not re.match(r"\w+://", target):
            assert (here / target).exists(), f"{page}: link to {target}"


NOT_OURS = {"numpy.py"}  # docs/robustness.md: a stray numpy.py where the command runs is never executed


@functools.lru_cache(maxsize=1)
def python_files() -> frozenset[str]:
    """Every .py file of the tree as a path from the root (hidden folders, such as git's and the CI's venv, aside)."""
    found = set()
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = [d for d in subfolders if not d.startswith(".") and d != "__pycache__"]
        found |= {(Path(folder) / f).relative_to(ROOT).as_posix() for f in files if f.endswith(".py")}
    return frozenset(found)


VARIABLE = re.compile(r"\b(OVRNN_[A-Z_]+)\b")


@functools.lru_cache(maxsize=1)
def variables_read() -> frozenset[str]:
    """The OVRNN_ environment variables the code of ovrnn/, tools/ and tests/ names."""
    code = [ROOT / f for f in python_files() if f.split("/")[0] in ("ovrnn", "tools", "tests")]
    return frozenset(v for path in code for v in VARIABLE.findall(path.read_text()))


@pytest.mark.parametrize("page", list(PAGES))
def test_every_python_file_and_variable_named_exists(page):
    """Moves leave no stale name behind. Each .py file a page names, in backticks or not, exists: as a path
    from the root (`tests/cli/test_errors.py`) or as the end of one (`onnx/reading/fold.py`, `passes.py`); and
    each OVRNN_ environment variable it names is read by ovrnn/, tools/ or tests/."""
    files = python_files()
    for named in re.findall(r"(?<![\w/<>.-])((?:[\w-]+/)*\w+\.py)\b", PAGES[page]):
        if named in NOT_OURS:
            continue
        found = named in files or any(f.endswith("/" + named) for f in files)
        assert found, f"{page} names {named}, which is not in the tree"
    unread = set(VARIABLE.findall(PAGES[page])) - variables_read()
    assert not unread, f"{page} names {sorted(unread)}, which nothing reads"


def test_test_count_and_time_are_what_the_suite_has():
    """README and docs/development.md say "over N tests": more are collected, and not so many more that N
    undersells them (at most 20% more). The README's "A to B minutes" holds every measured time the
    development page gives ("10 min 13 s")."""
    pages = [README, PAGES["docs/development.md"]]
    claims = [int(n.replace(",", "")) for page in pages for n in re.findall(r"over ([\d,]+) tests", page)]
    assert len(claims) == 2, claims
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    collected = int(re.search(r"(\d+) tests? collected", proc.stdout).group(1))
    for claimed in claims:
        assert claimed < collected <= 1.2 * claimed, f"the docs say over {claimed} tests; {collected} are collected"
    low, high = map(int, re.search(r"(\d+) to (\d+) minutes", README).group(1, 2))
    measured = [int(m) + int(s) / 60 for m, s in re.findall(r"(\d+) min (\d+) s", PAGES["docs/development.md"])]
    assert measured and all(low <= m <= high for m in measured), (low, high, measured)


def test_cli_page_names_every_flag():
    """The README says "Every flag: docs/cli.md": each option of each command (one of its spellings)
    is named on that page, and so are the commands' defaults the CLI's help gives."""
    page = PAGES["docs/cli.md"]
    parser = cli.build_parser()
    for command in ("convert", "run", "validate", "inspect", "devices", "demo"):
        sub = cli.subparser(parser, command)
        for action in sub._actions:
            spellings = [o for o in action.option_strings if o not in ("-h", "--help")]
            if spellings:
                assert any(re.search(re.escape(o) + r"(?![\w-])", page) for o in spellings), (
                    f"docs/cli.md does not name `ovrnn {command} {spellings[-1]}`"
                )
    from ovrnn.device.cpu_forms import PIECE_STEPS
    from ovrnn.plan.request import DEFAULT_CHUNK_STEPS
    from ovrnn.quantization import DEFAULT_MAX_ERROR
    from ovrnn.semantics.limits import DEFAULT_MAX_STEPS
    from ovrnn.validation.compare import DEFAULT_BATCH
    from ovrnn.validation.stream import DEFAULT_CHUNKS

    assert {a.dest: a.default for a in cli.subparser(parser, "convert")._actions}["chunk_steps"] is None  # resolved by plan
    for default in (
        f"--chunk-steps N` (default {DEFAULT_CHUNK_STEPS}; {PIECE_STEPS} where `--device CPU` reads the measured table)",
        f"--max-steps N` (default {DEFAULT_MAX_STEPS}",
        f"--max-weight-error E` (default {DEFAULT_MAX_ERROR:g}",
        f"[--chunks {DEFAULT_CHUNKS}]",
        f"[--batch {DEFAULT_BATCH}]",
    ):
        assert default in page, default


def test_the_style_the_development_page_states_is_kept():
    """docs/development.md: ruff 0.17.6 from the test extra, run by .ci/run before the tests, lines at 140; and the tree
    as it stands passes both (the linter also fails on a line over 140, strings and comments too)."""
    import tomllib

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "ruff==0.17.6" in pyproject["project"]["optional-dependencies"]["test"]
    assert pyproject["tool"]["ruff"]["line-length"] == 140 and "E" in pyproject["tool"]["ruff"]["lint"]["select"]
    steps = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert steps.index("ruff check .") < steps.index("pytest") and steps.index("ruff format --check .") < steps.index("pytest")
    assert "`ruff format .` and `ruff check .` (ruff 0.17.6" in PAGES["docs/development.md"]
    for command in (["check", "."], ["format", "--check", "."]):
        run = subprocess.run([sys.executable, "-m", "ruff", *command], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-1000:]


def test_development_page_lists_every_tool():
    """docs/development.md names every script in tools/ (a file with a __main__ block; the others are
    modules a script imports, as bench_real.py is bench.py's), and each one it names exists (above)."""
    named = set(re.findall(r"python (tools/\w+\.py)", PAGES["docs/development.md"]))
    tools = list((ROOT / "tools").glob("*.py"))
    scripts = {p.relative_to(ROOT).as_posix() for p in tools if 'if __name__ == "__main__"' in p.read_text()}
    assert len(scripts) >= 15 and scripts <= named
    modules = {p.stem for p in tools} - {Path(s).stem for s in scripts}
    assert all(any(re.search(rf"^\s*(import|from) {m}\b", p.read_text(), re.M) for p in tools) for m in modules)


def test_the_flag_check_is_not_vacuous():
    """convert's OVMS version flag was renamed: the old spelling would be caught above."""
    assert "--version" not in options_of("convert") and "--model-version" in options_of("convert")
    assert {"--output_model", "--compress_to_fp16", "-o"} <= options_of("convert")


def test_the_ir_op_versions_are_the_ones_the_readme_lists():
    """docs/ir.md's "Only opset1 ops (plus ...)": every template of another opset is in that list, and back."""
    listed = re.search(r"opset1 ops \(plus ([^)]*)\)", PAGES["docs/ir.md"].replace("\n  ", " ")).group(1)
    claimed = {tuple(item.strip().rsplit("-", 1)) for item in listed.split(",")}
    actual = set()
    for template in (ROOT / "ir_templates").glob("*.xml"):
        for op_type, version in re.findall(r'type="(\w+)" version="opset(\d+)"', template.read_text()):
            if version != "1":
                actual.add((op_type, version))
    assert actual == claimed


def test_cpu_folds_the_chain_with_runtime_sequence_lens():
    """ "On CPU the plugin folds the RNNCell chain back into an RNNSeq node, with runtime sequence_lens too"."""
    import ovrnn
    from ovrnn.examples import DEMO_MODEL  # bidirectional, sequence_lens and initial_h as inputs

    report = ovrnn.validate(DEMO_MODEL)
    assert report.passed and report.runtime_layer_types.get("RNNSeq") == 2  # one per direction
    assert "RNNCell" not in report.runtime_layer_types


def test_the_cpu_form_example_is_the_measured_tables():
    """README: "on the Intel Xeon of its table: MatMul steps for GRU with `linear_before_reset=0` ...; a CPU with no row keeps
    the cells" (the second half: tests/device/test_cpu_forms.py's note for an unmeasured machine)."""
    from ovrnn.device import cpu_forms

    assert "on the Intel Xeon of its table: MatMul steps for GRU with `linear_before_reset=0`" in " ".join(README.split())
    xeon = [e for e in cpu_forms.load_table() if "Xeon" in e["cpu"]]
    assert xeon and all(r["choice"] == "matmul" for e in xeon for r in e["rows"] if r["op"] == "GRU")
    assert any(r["op"] == "GRU" for e in xeon for r in e["rows"])


def test_the_int8_bin_ratio_the_readme_gives(tmp_path):
    """README: "the int8 .bin is 0.255× the f32 IR's for an LSTM H=256" (tools/bench.py --only compression's model, T=64,
    I=256, forward; bytes, so exact here)."""
    import ovrnn

    claimed = float(re.search(r"the int8 \.bin\s+is ([\d.]+)× the f32 IR's for an LSTM H=256", README).group(1))
    path = load_tool("bench").uneven_lstm(tmp_path / "q.onnx", 64, 256, 256, "forward")
    f32 = len(ovrnn.convert_model(str(path)).bin)
    int8 = len(ovrnn.convert_model(str(path), compress_weights="int8", max_weight_error=float("inf")).bin)
    assert round(int8 / f32, 3) == claimed, int8 / f32


def test_the_batch_1_figures_are_the_performance_pages():
    """README's "Speed at batch 1" figures, date and machine are those of docs/performance.md's batch-1 runs (its first
    run's table), so a new run there cannot leave the README behind."""
    readme, perf = (" ".join(PAGES[p].split()) for p in ("README.md", "docs/performance.md"))
    date, models, median, worst, vs_openvino, silero, lstm = re.search(
        r"Runs of (\d+ \w+ \d{4}) \(2 vCPUs of an Intel Xeon, quiet\): ovrnn ÷ onnxruntime on (\d+) whole models median \*\*([\d.]+)\*\*, "
        r"worst \*\*([\d.]+)\*\*; ÷ OpenVINO's import median ([\d.]+); streams through `ovrnn.Stream`: silero VAD ([\d.]+), a one-step "
        r"LSTM H=128 (\d+\.\d+)",
        readme,
    ).groups()
    assert f"two runs on {date}" in perf and "on this project's VM: 2 vCPUs of an Intel Xeon" in perf
    assert f"| whole real architectures, median over {models} models | **{median}** " in perf
    assert f"| whole real architectures, worst model | **{worst}** " in perf
    assert f"median ÷ OpenVINO's import {vs_openvino}." in perf
    assert re.search(
        rf"one-step LSTM H=128 / 16 steps / silero VAD \| \*\*{lstm}\*\* \[[\d.]+\] / [\d.]+ \[[\d.]+\] / \*\*{silero}\*\*", perf
    )


def test_the_python_calls_the_pages_name_take_those_keywords():
    """Every `ovrnn.name(..., keyword=value)` a page shows names a keyword that callable takes; the two the pages give as
    signatures (Runner, extension) give its defaults."""
    import ast
    import inspect

    import ovrnn

    spans = sorted({s for text in PAGES.values() for s in re.findall(r"`(ovrnn\.\w+\([^`]*=[^`]*\))`", text)})
    assert len(spans) >= 5, spans
    for span in spans:
        name = span[len("ovrnn.") : span.index("(")]
        parameters = inspect.signature(getattr(ovrnn, name)).parameters
        for keyword, value in re.findall(r"(\w+)=([^,)]+)", span):
            assert keyword in parameters, f"`{span}`: ovrnn.{name} takes no {keyword}"
            if name in ("Runner", "extension"):
                assert parameters[keyword].default == ast.literal_eval(value), (
                    f"`{span}`: {keyword} defaults to {parameters[keyword].default!r}"
                )


def test_the_limits_table_is_the_codes(monkeypatch):
    """docs/robustness.md's table of limits gives the numbers the code enforces (defaults: no OVRNN_MAX_ variable set)."""
    from ovrnn import shapes
    from ovrnn.cli.run import MAX_REPEAT
    from ovrnn.semantics.limits import XML_BYTES_PER_STEP

    for variable in ("OVRNN_MAX_INPUT_BYTES", "OVRNN_MAX_IR_BYTES", "OVRNN_MAX_IR_LAYERS"):
        monkeypatch.delenv(variable, raising=False)
    rows = {
        row[0]: row[1]
        for row in (
            [c.strip() for c in ln.strip(" |").split(" | ")]
            for ln in PAGES["docs/robustness.md"].splitlines()
            if ln.strip().startswith("| ")
        )
        if len(row) == 3
    }
    limit = lambda start: next(v for k, v in rows.items() if k.startswith(start))  # noqa: E731
    assert limit("one dimension of `--input`") == f"{shapes.MAX_DIM:,}"
    assert limit("elements in one tensor") == "2^40" and shapes.MAX_ELEMENTS == 2**40
    assert limit("one `run --input` array") == "2 GiB" and shapes.max_input_bytes() == 2 << 30
    steps = round(shapes.max_ir_bytes() / XML_BYTES_PER_STEP, -3)
    assert limit("the IR a conversion would write") == f"1 GiB of XML, about {steps:,.0f} steps" and shapes.max_ir_bytes() == 1 << 30
    assert f"at {XML_BYTES_PER_STEP:,} bytes of XML per unrolled step" in next(k for k in rows if k.startswith("the IR a conversion"))
    assert limit("layers in an IR") == f"{shapes.max_ir_layers():,}"
    assert limit("`run --repeat`") == f"{MAX_REPEAT:,}"
