"""A BERT encoder with mean pooling and L2 normalisation as an ONNX graph, built from weights.

The graph is what sentence-transformers computes for a `Transformer -> Pooling(mean) ->
Normalize` model (all-MiniLM-L6-v2): word + position + token-type embeddings, layer norm, then
per layer self-attention with an additive padding mask, a residual layer norm, an erf GELU
feed-forward and another residual layer norm; finally the mean of the unpadded token states,
divided by its length. Only standard ONNX operators (opset 18) are used, so ONNX Runtime runs it
on any CPU without torch.

Inputs: `input_ids` and `attention_mask`, int64 `[batch, tokens]`. Output: `embedding`, float32
`[batch, hidden]`, unit length.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

OPSET = 18


@dataclass(frozen=True)
class BertShape:
    hidden: int
    heads: int
    layers: int
    eps: float

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> BertShape:
        """Read a BERT `config.json`; refuse what the graph cannot mirror."""
        if config.get("model_type") != "bert" or config.get("hidden_act") != "gelu":
            raise ValueError(
                "only BERT encoders with the erf GELU are supported; got model_type"
                f" {config.get('model_type')!r}, hidden_act {config.get('hidden_act')!r}"
            )
        if config.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError("only absolute position embeddings are supported")
        return cls(
            hidden=int(config["hidden_size"]),
            heads=int(config["num_attention_heads"]),
            layers=int(config["num_hidden_layers"]),
            eps=float(config["layer_norm_eps"]),
        )


class _Graph:
    """Accumulates nodes and initializers; every node output gets a fresh name."""

    def __init__(self) -> None:
        from onnx import helper, numpy_helper

        self._helper = helper
        self._numpy_helper = numpy_helper
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._count = 0

    def const(self, name: str, value: NDArray[Any]) -> str:
        self.initializers.append(self._numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(self, op_type: str, *inputs: str, **attributes: Any) -> str:
        self._count += 1
        output = f"{op_type.lower()}_{self._count}"
        self.nodes.append(self._helper.make_node(op_type, list(inputs), [output], **attributes))
        return output


def build(weights: Mapping[str, NDArray[np.float32]], shape: BertShape) -> bytes:
    """The serialized ONNX model of the encoder, pooling and normalisation over `weights`
    (the tensors of a Hugging Face `BertModel` checkpoint, as named in its safetensors file)."""
    from onnx import TensorProto, helper

    g = _Graph()
    w = weights
    f32 = np.float32
    head_size = shape.hidden // shape.heads

    def scalar(name: str, value: float) -> str:
        return g.const(name, np.array(value, dtype=f32))

    def ints(name: str, *values: int) -> str:
        return g.const(name, np.array(values, dtype=np.int64))

    one, half = scalar("one", 1.0), scalar("half", 0.5)
    inv_sqrt2 = scalar("inv_sqrt2", 1 / math.sqrt(2))
    attention_scale = scalar("attention_scale", 1 / math.sqrt(head_size))
    # what transformers adds to a padded position's score: the most negative float32
    masked = scalar("masked", float(np.finfo(f32).min))
    zero_1d, one_1d, last_axis = ints("zero_1d", 0), ints("one_1d", 1), ints("last_axis", -1)
    split_heads = ints("split_heads", 0, 0, shape.heads, head_size)
    merge_heads = ints("merge_heads", 0, 0, shape.hidden)

    def linear(x: str, prefix: str) -> str:
        weight = g.const(f"{prefix}.weight", w[f"{prefix}.weight"].T)
        bias = g.const(f"{prefix}.bias", w[f"{prefix}.bias"])
        return g.op("Add", g.op("MatMul", x, weight), bias)

    def layer_norm(x: str, prefix: str) -> str:
        gamma = g.const(f"{prefix}.weight", w[f"{prefix}.weight"])
        beta = g.const(f"{prefix}.bias", w[f"{prefix}.bias"])
        return g.op("LayerNormalization", x, gamma, beta, axis=-1, epsilon=shape.eps)

    # embeddings: every token of a single-text input has token type 0
    words = g.const("word_embeddings", w["embeddings.word_embeddings.weight"])
    positions = g.const(
        "position_embeddings",
        w["embeddings.position_embeddings.weight"]
        + w["embeddings.token_type_embeddings.weight"][0],
    )
    tokens = g.op("Gather", g.op("Shape", "input_ids"), one_1d, axis=0)
    x = g.op(
        "Add",
        g.op("Gather", words, "input_ids", axis=0),
        g.op("Slice", positions, zero_1d, tokens, zero_1d),
    )
    x = layer_norm(x, "embeddings.LayerNorm")

    mask = g.op("Cast", "attention_mask", to=TensorProto.FLOAT)
    # [batch, 1, 1, tokens]: 0 where a token is real, `masked` where it is padding
    score_bias = g.op(
        "Unsqueeze", g.op("Mul", g.op("Sub", one, mask), masked), ints("head_axes", 1, 2)
    )

    def heads(x: str, prefix: str, perm: list[int]) -> str:
        return g.op("Transpose", g.op("Reshape", linear(x, prefix), split_heads), perm=perm)

    for i in range(shape.layers):
        p = f"encoder.layer.{i}"
        # [batch, heads, tokens, head_size]; keys transposed for the product
        query = heads(x, f"{p}.attention.self.query", [0, 2, 1, 3])
        key = heads(x, f"{p}.attention.self.key", [0, 2, 3, 1])
        value = heads(x, f"{p}.attention.self.value", [0, 2, 1, 3])
        scores = g.op("Add", g.op("Mul", g.op("MatMul", query, key), attention_scale), score_bias)
        context = g.op("MatMul", g.op("Softmax", scores, axis=-1), value)
        context = g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]), merge_heads)
        x = layer_norm(
            g.op("Add", linear(context, f"{p}.attention.output.dense"), x),
            f"{p}.attention.output.LayerNorm",
        )
        inner = linear(x, f"{p}.intermediate.dense")
        gelu = g.op(
            "Mul",
            g.op("Mul", inner, half),
            g.op("Add", one, g.op("Erf", g.op("Mul", inner, inv_sqrt2))),
        )
        x = layer_norm(g.op("Add", linear(gelu, f"{p}.output.dense"), x), f"{p}.output.LayerNorm")

    # mean of the real tokens' states, then unit length (the clamps are sentence-transformers')
    token_mask = g.op("Unsqueeze", mask, last_axis)
    summed = g.op("ReduceSum", g.op("Mul", x, token_mask), one_1d, keepdims=0)
    counts = g.op(
        "Max", g.op("ReduceSum", token_mask, one_1d, keepdims=0), scalar("min_count", 1e-9)
    )
    mean = g.op("Div", summed, counts)
    norm = g.op("Max", g.op("ReduceL2", mean, last_axis, keepdims=1), scalar("min_norm", 1e-12))
    g.nodes.append(helper.make_node("Div", [mean, norm], ["embedding"]))

    graph = helper.make_graph(
        g.nodes,
        "bert_mean_pooling",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "tokens"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "tokens"]),
        ],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", shape.hidden])],
        g.initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 9
    serialized: bytes = model.SerializeToString()
    return serialized
