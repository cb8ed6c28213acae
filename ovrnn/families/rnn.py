"""The ONNX RNN op: H_t = f(clip(X_t·Wᵀ + H_{t-1}·Rᵀ + Wb + Rb)). Shapes in ONNX names (layout 0;
layout 1 swaps seq_length and batch in X, Y, initial_h, Y_h)."""

from __future__ import annotations

from . import InputSlot, OpFamily, register


class RnnInputs(InputSlot):
    X = (0, "[seq_length, batch, input_size]")
    W = (1, "[num_directions, hidden_size, input_size]")
    R = (2, "[num_directions, hidden_size, hidden_size]")
    B = (3, "[num_directions, 2*hidden_size]")
    sequence_lens = (4, "[batch]")
    initial_h = (5, "[num_directions, batch, hidden_size]")


RNN = register(
    OpFamily(
        name="RNN",
        domain="",
        cell="RNNCell",
        gates=1,
        gate_order=(0,),
        slots=("f",),
        default_activations=("Tanh",),
        input_slots=RnnInputs,
        outputs=("Y", "Y_h"),
        no_cell=("NPU",),  # the NPU compiler imports GRUCell-3 and LSTMCell-1/-4, not RNNCell
        loop_activations=(("Relu",),),  # tf2onnx's SimpleRNN(activation="relu")
        rt_info_op=False,  # its IRs predate the "op" entry: inspect reads an IR without it as RNN's
    )
)
