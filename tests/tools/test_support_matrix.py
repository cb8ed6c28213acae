"""The support table (docs/support.md, summed up in the README) against tools/support_matrix.py, without running the whole matrix:
the rows and case counts per op are the tool's, every cell adds up, and the "OpenVINO's import is
silently wrong" claims hold on one case each (run through the tool's own child process)."""

import json
import re
import subprocess
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))

import support_matrix as tool
from cases import GRU_CASES, LSTM_CASES, RNN_CASES

README = (ROOT / "README.md").read_text()
SUPPORT = (ROOT / "docs" / "support.md").read_text()


def readme_table(op: str) -> list[list[str]]:
    lines = [ln for ln in SUPPORT.splitlines() if ln.startswith("|")]
    start = next(i for i, ln in enumerate(lines) if ln.startswith(f"| {op} feature (cases) |"))
    table = []
    for ln in lines[start + 2 :]:
        table.append([cell.strip() for cell in ln.strip("|").split(" | ")])
        if ln.startswith("| **all "):
            break
    return table


@pytest.mark.parametrize("op, cases", [("RNN", RNN_CASES), ("GRU", GRU_CASES), ("LSTM", LSTM_CASES)], ids=["RNN", "GRU", "LSTM"])
def test_readme_rows_are_the_tools_rows(op, cases):
    table = readme_table(op)
    want = [f"{label} ({' · '.join(str(len(g)) for g in groups)})" for label, groups in tool.rows(cases)]
    assert [row[0] for row in table[:-1]] == want
    for row, (_, groups) in zip(table, tool.rows(cases)):
        for cell in row[1:]:  # "a/n (w wrong...)" per sub-column, n the group's size
            assert [int(n) for n in re.findall(r"\d+/(\d+)", cell)] == [len(g) for g in groups], (row[0], cell)
    total = table[-1]
    assert total[0] == f"**all {len(cases)} {op} cases**"
    for cell in total[1:]:
        ok, wrong, refused = map(int, re.fullmatch(r"\*\*(\d+)\*\* \((\d+) wrong, (\d+) refused\)", cell).groups())
        assert ok + wrong + refused == len(cases)
    assert total[1] == f"**{len(cases)}** (0 wrong, 0 refused)"  # ovrnn: every case


def test_readme_counts_match_the_case_table():
    assert (len(RNN_CASES), len(GRU_CASES), len(LSTM_CASES)) == (95, 87, 99)
    assert "95 RNN, 87 GRU and 99 LSTM" in SUPPORT
    assert f"All {len(RNN_CASES) + len(GRU_CASES) + len(LSTM_CASES)} one-node models of the test table" in README


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_readme_summary_is_the_support_tables_total(op):
    """The README's one support table holds each op's totals row of docs/support.md."""
    total = readme_table(op)[-1]
    row = next(ln for ln in README.splitlines() if ln.startswith(f"| {op} ("))
    cells = [c.strip() for c in row.strip("|").split(" | ")]
    count = int(total[0].split()[1])
    assert cells[0] == f"{op} ({count} cases)"
    assert cells[1:4] == total[1:], (cells, total)


def run_child(tool_name: str, keys: list[str]) -> dict[str, str]:
    proc = subprocess.run(
        [sys.executable, "-I", str(ROOT / "tools" / "support_matrix.py"), "--child", tool_name, *keys],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {r["key"]: r["verdict"] for r in map(json.loads, proc.stdout.splitlines())}


CLAIMS = {  # docs/support.md: OpenVINO's import is silently wrong on ...
    "LSTM:lstm-peepholes": "P dropped",
    "LSTM:lstm-input-forget": "input_forget dropped",
    "GRU:gru-opset7-bidir-relu-tanh": "forward activations used for both",
    "GRU:gru-dyn-batch-lbr1-lens": "sequence_lens ignored",
    "LSTM:lstm-clip0": 'read as "no clip"',
    "GRU:gru-layout1-fwd": "layout ignored",
}


def test_openvino_import_claims_hold():
    for note in CLAIMS.values():
        assert note in SUPPORT
    keys = list(CLAIMS)
    assert run_child("OpenVINO ONNX import", keys) == dict.fromkeys(keys, "wrong")
    assert run_child("ovrnn", keys) == dict.fromkeys(keys, "ok")
    ort = run_child("onnxruntime", keys)  # right where it runs; refuses clip=0 and layout=1
    assert ort == {k: "refused" if ("clip0" in k or "layout1" in k) else "ok" for k in keys}
