"""Write tests/fixtures/rl/: an sb3-contrib RecurrentPPO policy exported by torch.onnx, the whole
model tests/onnx_graph/test_frontend_fixes.py converts and validates.

* ``recurrent_ppo.onnx``: ``RecurrentPPO("MlpLstmPolicy", CartPole-v1)`` with a tiny net
  (``net_arch=dict(pi=[8], vf=[8])``, ``lstm_hidden_size=8``) and its random initial weights
  (seed 0), wrapped as ``forward(obs, h_pi, c_pi, h_vf, c_vf, episode_starts) -> actions, values,
  log_prob, h_pi_out, c_pi_out, h_vf_out, c_vf_out`` (deterministic actions; both LSTM states in
  and out), for 4 environments. torch.onnx (TorchScript exporter, dynamo=False, opset 17) writes
  the Categorical's ``logits - logsumexp(logits, -1)`` as ``ReduceLogSumExp(axes=[-1])``, which
  OpenVINO 2026.4.1 reads wrong, and its ``log_prob`` as a ``GatherElements`` with a [4, 1] index
  into [4, 2] logits, which onnx.reference refuses. ``episode_starts`` is traced on its all-zero
  branch, so the export does not read it.
* ``recurrent_ppo.inputs.npz``: seeded inputs keyed by ONNX input name (the inputs the graph reads).
* ``recurrent_ppo.torch.npz``: the policy's own outputs for them, keyed by ONNX output name.

torch and sb3-contrib are used only here (never by the tests). Rerun with torch==2.13.0 (CPU),
sb3-contrib 2.9 and gymnasium 1.4:

    python tools/make_rl_fixtures.py
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import onnx
import torch
from sb3_contrib import RecurrentPPO
from sb3_contrib.common.recurrent.type_aliases import RNNStates

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "rl"
OPSET = 17
MAX_IR_VERSION = 8  # onnxruntime reads IR <= 13; onnx 1.23 writes 14
ENVS, HIDDEN = 4, 8
INPUTS = ["obs", "h_pi", "c_pi", "h_vf", "c_vf", "episode_starts"]
OUTPUTS = ["actions", "values", "log_prob", "h_pi_out", "c_pi_out", "h_vf_out", "c_vf_out"]


class PolicyStep(torch.nn.Module):
    """One step of the recurrent policy, the states as plain tensors (what a deployment feeds)."""

    def __init__(self, policy):
        super().__init__()
        self.policy = policy

    def forward(self, obs, h_pi, c_pi, h_vf, c_vf, episode_starts):
        actions, values, log_prob, states = self.policy(obs, RNNStates((h_pi, c_pi), (h_vf, c_vf)), episode_starts, deterministic=True)
        return actions, values, log_prob, states.pi[0], states.pi[1], states.vf[0], states.vf[1]


def main() -> None:
    torch.manual_seed(0)
    model = RecurrentPPO(
        "MlpLstmPolicy",
        gym.make("CartPole-v1"),
        seed=0,
        device="cpu",
        policy_kwargs=dict(net_arch=dict(pi=[8], vf=[8]), lstm_hidden_size=HIDDEN),
    )
    step = PolicyStep(model.policy.eval())
    rng = np.random.default_rng(0)
    obs = rng.uniform(-1.0, 1.0, (ENVS, 4)).astype(np.float32)
    states = [rng.uniform(-1.0, 1.0, (1, ENVS, HIDDEN)).astype(np.float32) for _ in range(4)]
    args = tuple(torch.from_numpy(a) for a in (obs, *states, np.zeros(ENVS, np.float32)))
    with torch.no_grad():
        outputs = step(*args)
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = Path(tmp) / "model.onnx"
        torch.onnx.export(step, args, str(path), input_names=INPUTS, output_names=OUTPUTS, opset_version=OPSET, dynamo=False)
        exported = onnx.load(str(path))
    exported.ir_version = min(exported.ir_version, MAX_IR_VERSION)
    exported.producer_version = ""  # the torch build string would make reruns differ for nothing
    onnx.save(exported, str(OUT / "recurrent_ppo.onnx"))
    read = {i.name for i in exported.graph.input}
    np.savez(OUT / "recurrent_ppo.inputs.npz", **{k: v.numpy() for k, v in zip(INPUTS, args) if k in read})
    np.savez(OUT / "recurrent_ppo.torch.npz", **{k: v.numpy() for k, v in zip(OUTPUTS, outputs)})
    print(f"wrote {OUT / 'recurrent_ppo.onnx'} ({sorted({n.op_type for n in exported.graph.node})})")


if __name__ == "__main__":
    main()
