"""speechbrain's Light GRU (speechbrain 1.1.2, ``speechbrain/nnet/RNN.py``: ``LiGRU``,
``LiGRU_Layer``, ``rnn_init``; Apache-2.0), for tools/make_loop_fixtures.py where speechbrain
itself does not import (its wheel needs torchaudio, whose PyPI build may not load against a CPU
torch). The forward path is speechbrain's, line for line, docstrings shortened; the training-only
branches (dropout mask resampling) are kept, as torch.jit.script compiles them.

    h_t = z_t * h_{t-1} + (1 - z_t) * act(a_t) * drop_mask,  [a_t, z_t] = BN(W x)_t + U h_{t-1},
    z_t = sigmoid(z_t)

``torch.jit.script`` turns ``for k in range(w.shape[1]): gates = w[:, k] + self.u(ht)`` into an
ONNX Loop whose body reads ``w`` through ``Slice(w, 0, INT64_MAX, axis 0)`` then ``Gather(., k, axis=1)``.
"""

from __future__ import annotations

import torch
from torch import nn


class LiGRU(torch.nn.Module):
    """speechbrain.nnet.RNN.LiGRU: input (batch, time, fea), output (batch, time, hidden) and the
    last hidden state of each layer."""

    def __init__(
        self,
        hidden_size,
        input_shape,
        nonlinearity="relu",
        normalization="batchnorm",
        num_layers=1,
        bias=True,
        dropout=0.0,
        re_init=True,
        bidirectional=False,
    ):
        super().__init__()
        self.hidden_size = hidden_size
        self.nonlinearity = nonlinearity
        self.num_layers = num_layers
        self.normalization = normalization
        self.bias = bias
        self.dropout = dropout
        self.re_init = re_init
        self.bidirectional = bidirectional
        self.reshape = False
        if len(input_shape) > 3:
            self.reshape = True
        self.fea_dim = float(torch.prod(torch.tensor(input_shape[2:])))
        self.batch_size = input_shape[0]
        self.rnn = self._init_layers()
        if self.re_init:
            rnn_init(self.rnn)

    def _init_layers(self):
        rnn = torch.nn.ModuleList([])
        current_dim = self.fea_dim
        for _ in range(self.num_layers):
            rnn_lay = LiGRU_Layer(
                current_dim,
                self.hidden_size,
                self.num_layers,
                self.batch_size,
                dropout=self.dropout,
                nonlinearity=self.nonlinearity,
                normalization=self.normalization,
                bias=self.bias,
                bidirectional=self.bidirectional,
            )
            rnn.append(rnn_lay)
            if self.bidirectional:
                current_dim = self.hidden_size * 2
            else:
                current_dim = self.hidden_size
        return rnn

    def forward(self, x, hx: torch.Tensor | None = None):
        if self.reshape and x.ndim == 4:
            x = x.reshape(x.shape[0], x.shape[1], x.shape[2] * x.shape[3])
        output, hh = self._forward_ligru(x, hx=hx)
        return output, hh

    def _forward_ligru(self, x, hx: torch.Tensor | None):
        h = []
        if hx is not None and self.bidirectional:  # TorchScript refines Optional through `and`
            hx = hx.reshape(self.num_layers, self.batch_size * 2, self.hidden_size)
        for i, ligru_lay in enumerate(self.rnn):
            if hx is not None:
                x = ligru_lay(x, hx=hx[i])
            else:
                x = ligru_lay(x, hx=None)
            h.append(x[:, -1, :])
        h = torch.stack(h, dim=1)
        if self.bidirectional:
            h = h.reshape(h.shape[1] * 2, h.shape[0], self.hidden_size)
        else:
            h = h.transpose(0, 1)
        return x, h


class LiGRU_Layer(torch.nn.Module):
    """speechbrain.nnet.RNN.LiGRU_Layer: one Li-GRU layer."""

    def __init__(
        self,
        input_size,
        hidden_size,
        num_layers,
        batch_size,
        dropout=0.0,
        nonlinearity="relu",
        normalization="batchnorm",
        bias=True,
        bidirectional=False,
    ):
        super().__init__()
        self.hidden_size = int(hidden_size)
        self.input_size = int(input_size)
        self.batch_size = batch_size
        self.bidirectional = bidirectional
        self.dropout = dropout
        self.bias = bias
        self.w = nn.Linear(self.input_size, 2 * self.hidden_size, bias=False)
        self.u = nn.Linear(self.hidden_size, 2 * self.hidden_size, bias=False)
        if self.bidirectional:
            self.batch_size = self.batch_size * 2
        self.normalize = False
        if normalization == "batchnorm":
            self.norm = nn.BatchNorm1d(2 * self.hidden_size, momentum=0.05)
            self.normalize = True
        elif normalization == "layernorm":
            self.norm = torch.nn.LayerNorm(2 * self.hidden_size)
            self.normalize = True
        else:
            self.norm = torch.nn.LayerNorm(2 * self.hidden_size)
            self.normalize = True
        if not self.bias:
            self.norm.bias.data.fill_(0)
            self.norm.bias.requires_grad = False
        self.register_buffer("h_init", torch.zeros(1, self.hidden_size))
        self._init_drop()
        if nonlinearity == "tanh":
            self.act = torch.nn.Tanh()
        elif nonlinearity == "sin":
            self.act = torch.sin
        elif nonlinearity == "leaky_relu":
            self.act = torch.nn.LeakyReLU()
        else:
            self.act = torch.nn.ReLU()

    def forward(self, x: torch.Tensor, hx: torch.Tensor | None = None) -> torch.Tensor:
        if self.bidirectional:
            x_flip = x.flip(1)
            x = torch.cat([x, x_flip], dim=0)
        self._change_batch_size(x)
        w = self.w(x)
        if self.normalize:
            w_bn = self.norm(w.reshape(w.shape[0] * w.shape[1], w.shape[2]))
            w = w_bn.reshape(w.shape[0], w.shape[1], w.shape[2])
        if hx is not None:
            h = self._ligru_cell(w, hx)
        else:
            h_init = self.h_init.broadcast_to(w.shape[0], self.h_init.shape[1])
            h = self._ligru_cell(w, h_init)
        if self.bidirectional:
            h_f, h_b = h.chunk(2, dim=0)
            h_b = h_b.flip(1)
            h = torch.cat([h_f, h_b], dim=2)
        return h

    def _ligru_cell(self, w, ht):
        hiddens = []
        drop_mask = self._sample_drop_mask(w)
        for k in range(w.shape[1]):
            gates = w[:, k] + self.u(ht)
            at, zt = gates.chunk(2, 1)
            zt = torch.sigmoid(zt)
            hcand = self.act(at) * drop_mask
            ht = zt * ht + (1 - zt) * hcand
            hiddens.append(ht)
        h = torch.stack(hiddens, dim=1)
        return h

    def _init_drop(self):
        self.drop = torch.nn.Dropout(p=self.dropout, inplace=False)
        self.N_drop_masks = 16000
        self.drop_mask_cnt = 0
        self.register_buffer("drop_masks", self.drop(torch.ones(self.N_drop_masks, self.hidden_size)).data)
        self.register_buffer("drop_mask_te", torch.tensor([1.0]).float())

    def _sample_drop_mask(self, w):
        if self.training:
            if self.drop_mask_cnt + self.batch_size > self.N_drop_masks:
                self.drop_mask_cnt = 0
                self.drop_masks = self.drop(torch.ones(self.N_drop_masks, self.hidden_size, device=w.device)).data
            drop_mask = self.drop_masks[self.drop_mask_cnt : self.drop_mask_cnt + self.batch_size]
            self.drop_mask_cnt = self.drop_mask_cnt + self.batch_size
        else:
            self.drop_mask_te = self.drop_mask_te.to(w.device)
            drop_mask = self.drop_mask_te
        return drop_mask

    def _change_batch_size(self, x):
        if self.batch_size != x.shape[0]:
            self.batch_size = x.shape[0]
            if self.training:
                self.drop_masks = self.drop(torch.ones(self.N_drop_masks, self.hidden_size, device=x.device)).data


def rnn_init(module):
    """speechbrain.nnet.RNN.rnn_init: orthogonal recurrent weights."""
    for name, param in module.named_parameters():
        if "weight_hh" in name or ".u.weight" in name:
            nn.init.orthogonal_(param)
