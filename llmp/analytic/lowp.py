"""Low-precision training recipes: which GEMMs run in FP8/FP4, the kernels that quantise their
operands, and the low-precision copies they keep.

A recipe (``train.precision = fp8 | mxfp8 | nvfp4``, with ``train.fp8_scaling`` for fp8) runs
over BF16 training, as TransformerEngine's ``fp8_autocast`` and torchao's ``Float8Linear`` do:

* Low precision: the linear layers' GEMMs, forward, dgrad and wgrad alike (QKV, MLA's
  projections, proj, fc1, fc2, routed and shared experts, the MTP projection). TE's recipes
  quantise all three GEMMs of a ``Linear`` (NVIDIA/TransformerEngine docs/features/
  low_precision_training/performance_considerations, Table 2: forward, weight gradient and input
  gradient each read quantised operands); torchao ``Float8Linear`` likewise
  (pytorch/ao torchao/float8/float8_linear.py: ``matmul_with_hp_or_float8_args`` for the
  output, grad_input and grad_weight products).
* BF16: attention (TE runs ``DotProductAttention`` in BF16 unless ``fp8_dpa``, off by default),
  norms, softmax, the MoE router (a plain ``torch`` linear in Megatron-Core's ``TopKRouter``),
  embeddings and the output head (Megatron's ``output_layer`` is a ``ColumnParallelLinear``, not
  a TE module). Parameters and gradients stay BF16/FP32 as in BF16 training; so do activations,
  except that a TE module keeps each low-precision GEMM's input quantised for the weight
  gradient (:meth:`Recipe.saved_input_bytes`; torchao keeps the BF16 one).

Each low-precision GEMM operand is quantised by a kernel of its own (:class:`Quantize`): the
input and the weight in the forward, the output gradient in the backward, each in the views its
GEMMs read (rowwise for the forward, columnwise for wgrad and dgrad). Per recipe (TE docs,
"Handling transposes" in each recipe's page):

* ``delayed``: one read per tensor, the scale from the amax history (docs fp8_delayed_scaling:
  "this reduces tensor reads per quantization from two to one"); Hopper writes a physical
  transpose next to the rowwise copy (TE ``cast_transpose``), Blackwell reads FP8 in any layout
  and keeps one copy ("Blackwell: supports columnwise access natively, so no transpose is
  needed").
* ``current``: an amax pass, then the cast (docs fp8_current_scaling: "two tensor reads were
  needed - one to compute the amax, and one to apply the scaling"); copies as delayed.
* ``blockwise``: 1x128 blocks for inputs and gradients, quantised rowwise and columnwise from
  the BF16 source (docs fp8_blockwise_scaling: "transposing a 1D quantized tensor is not
  supported ... Both versions must be quantized separately"); 128x128 blocks for weights, whose
  columnwise copy on Hopper is a transpose of data and scales. DeepSeek-V3 §3.3.2 uses the same
  1x128 / 128x128 tiles.
* ``mxfp8``: 1x32 blocks both ways, no 2D (docs mxfp8: "rowwise and columnwise MXFP8 tensors
  are numerically different ... Both must be quantized independently"), no transpose.
* ``nvfp4``: a global amax pass (the FP32 ``s_global``), then 1x16 blocks rowwise and columnwise
  (the columnwise one after a 16x16 random Hadamard transform, stored transposed: "NVFP4 GEMM
  only supports the TN layout"); weights 16x16 2D blocks (docs nvfp4).

FP8 parameters (``train.fp8_param_gather``; Megatron-Core ``--fp8-param-gather``, which builds
the model under TE's ``fp8_model_init``): TE modules "hold only FP8 copies of its parameters, as
opposed to the default behavior where both higher precision and FP8 copies are present"
(NVIDIA/TransformerEngine transformer_engine/pytorch/fp8.py, ``fp8_model_init`` docstring). A
per-tensor FP8 parameter is a ``Float8Tensor``: its rowwise data, plus a physical transpose where
the columnwise view is used and the GPU cannot read FP8 columnwise (NVIDIA/TransformerEngine@006257e:
transformer_engine/pytorch/tensor/float8_tensor.py, ``Float8Quantizer.make_empty`` allocates
``data_transpose`` for ``columnwise_usage``; Blackwell needs none, as above), i.e. exactly the
copies :meth:`Recipe.weight_copy_bytes` counts, and no BF16 weight. An MXFP8 parameter keeps its
rowwise and columnwise MXFP8 data and scales. The optimizer state does not change: Megatron's
distributed optimizer makes its FP32 main parameter from the FP8 one (NVIDIA/Megatron-LM@0011998:
megatron/core/optimizer/distrib_optimizer.py, ``_build_model_and_main_param_groups``:
``shard_main_param = model_param.float()...`` for a Float8Tensor) and after each step quantises the
FP32 shard straight into the FP8 parameter (``quantize_param_shard``). Megatron's DDP keeps FP8
parameters in a parameter buffer of ``torch.uint8`` (megatron/core/distributed/
distributed_data_parallel.py, ``_allocate_buffers_for_parameters``: "when creating the param
buffer for fp8 params, it is necessary to use torch.uint8"), so the distributed optimizer's
parameter all-gather moves one byte per FP8 weight (:meth:`Recipe.gather_bytes`); MXFP8 parameters
are not mapped into that buffer and are gathered in BF16, then quantised (distrib_optimizer.py,
``_copy_main_params_to_param_buffer``: "This function is only used for MXFP8 params. Copy FP32
main params directly to param buffer for param all-gather since param buffer is not mapped to
model params for MXFP8 case"), the BF16 gather buffer sharing the gradient buffer
(``--reuse-grad-buf-for-mxfp8-param-ag``, set with ``fp8_param_gather`` by Megatron-Bridge's
``bf16_with_mxfp8_mixed``). Weights are still quantised every microbatch in the graph (see below),
where FP8 parameters are cast once per step, in the optimizer.

Not modelled: TE's ``LayerNormLinear`` fusion of the norm with the rowwise cast of QKV and fc1
(Megatron-Core's TE layers; torchao and ``te.Linear`` users cast separately), Megatron-Core's
caching of quantised weights across the microbatches of a step (``is_first_microbatch``; llmp
casts them every microbatch, as ``te.Linear`` without that argument and torchao do), quantised
all-gathers under sequence parallelism, and the tiny amax all-reduces.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmp.analytic.kernels import Family, Kernel, Pass, Quantize
from llmp.hardware.spec import Device, Dtype
from llmp.spec.spec import Fp8Scaling, Spec, fp8_scaling

AMAX_HISTORY = 1024
"""Amax history length of delayed scaling: TE ``DelayedScaling(amax_history_len=1024)``
(transformer_engine/common/recipe/__init__.py; docs/api/common.rst). Megatron-Core passes its
``--fp8-amax-history-len``, whose default is 1."""
AMAX_TENSORS = 5
"""Amax entries per linear module: input, weight, output in the forward; output gradient and
input gradient in the backward (TE ``FP8GlobalStateManager`` meta: ``num_fp8_tensors`` = 3
forward, 2 backward per GEMM)."""


def any_layout(device: Device) -> bool:
    """The tensor cores read an FP8 operand rowwise or columnwise from one copy (Blackwell: TN,
    NT and NN FP8 GEMMs). Blackwell is the generation whose tensor cores also apply block scales,
    which is what the catalog's ``mxfp8`` peak records; Hopper, Ada and CDNA3 have neither and need a
    physical transpose for the columnwise view."""
    return Dtype.MXFP8 in device.peak_flops


@dataclass(frozen=True, kw_only=True, slots=True)
class Recipe:
    """The low-precision recipe of a spec: the linear GEMMs' format and how operands are quantised."""

    dtype: Dtype
    """The linear layers' GEMM format (fp8, mxfp8 or nvfp4)."""
    scaling: Fp8Scaling | None
    """fp8's scaling recipe; None for the microscaling formats."""
    any_layout: bool
    """One FP8 copy serves both views (Blackwell); else Hopper's transposes."""
    fp8_params: bool = False
    """The quantised copies are the parameters (``train.fp8_param_gather``): no BF16 weight."""

    @classmethod
    def of(cls, spec: Spec) -> Recipe | None:
        """The spec's recipe, or None when its GEMMs run in a 16- or 32-bit format."""
        dtype = spec.train.precision.compute_dtype
        if not dtype.low_precision:
            return None
        return cls(dtype=dtype, scaling=fp8_scaling(spec.train), any_layout=any_layout(spec.cluster.gpu),
                   fp8_params=spec.train.fp8_param_gather)

    @property
    def block(self) -> int:
        """Elements per 1D block scale of inputs and gradients (0: one scale per tensor)."""
        if self.dtype is Dtype.FP8:
            return 128 if self.scaling is Fp8Scaling.BLOCKWISE else 0
        return 32 if self.dtype is Dtype.MXFP8 else 16

    @property
    def weight_block(self) -> int:
        """Elements per block scale of weights: 128x128 (blockwise), 16x16 (nvfp4), 1x32 (mxfp8)."""
        return {0: 0, 128: 128 * 128, 32: 32, 16: 16 * 16}[self.block]

    @property
    def global_amax(self) -> bool:
        """An amax pass over the whole tensor before the cast (current scaling; NVFP4's s_global)."""
        return self.scaling is Fp8Scaling.CURRENT or self.dtype is Dtype.NVFP4

    def _kernel(self, variant: Quantize, pass_: Pass, elements: Any, scales: Any) -> Kernel:
        return Kernel.make(Family.QUANTIZE, self.dtype, pass_, variant, elements=elements, scales=scales)

    def operand(self, elements: Any, pass_: Pass) -> list[tuple[str, Kernel]]:
        """Kernels quantising an input (forward) or an output gradient (backward) of ``elements``
        into the rowwise and columnwise views its GEMMs read: (name suffix, kernel) pairs."""
        out = [("amax", self._kernel(Quantize.AMAX, pass_, elements, 1))] if self.global_amax else []
        if self.block == 0:
            variant = Quantize.CAST if self.any_layout else Quantize.BOTH
            return [*out, ("cast", self._kernel(variant, pass_, elements, 1))]
        return [*out, ("cast", self._kernel(Quantize.BOTH, pass_, elements, 2 * elements / self.block))]

    def weight(self, elements: Any) -> list[tuple[str, Kernel]]:
        """Kernels quantising a weight of ``elements`` for the forward (rowwise) and dgrad
        (columnwise). A 2D-blocked weight's columnwise copy is its transpose (blockwise on
        Hopper), or comes out of the same kernel (nvfp4); MXFP8 quantises 1x32 blocks both ways."""
        if self.block in (0, 32):
            return self.operand(elements, Pass.FWD)
        out = [("amax", self._kernel(Quantize.AMAX, Pass.FWD, elements, 1))] if self.global_amax else []
        scales = elements / self.weight_block
        if self.dtype is Dtype.NVFP4:
            return [*out, ("cast", self._kernel(Quantize.BOTH, Pass.FWD, elements, scales))]
        out.append(("cast", self._kernel(Quantize.CAST, Pass.FWD, elements, scales)))
        if not self.any_layout:
            out.append(("transpose", self._kernel(Quantize.TRANSPOSE, Pass.FWD, elements, scales)))
        return out

    @property
    def scale_bytes(self) -> int:
        """Bytes of one block scale: FP32 for blockwise FP8 (TE ``Float8BlockwiseQTensor``), E8M0
        for MXFP8, E4M3 for NVFP4's 16-element blocks (TE docs, each recipe's page)."""
        return {Dtype.FP8: 4, Dtype.MXFP8: 1, Dtype.NVFP4: 1}[self.dtype]

    def saved_input_bytes(self, gathered: bool = False) -> Any:
        """Bytes per element of a GEMM input as a TransformerEngine module keeps it for its weight
        gradient: one quantised view (the columnwise one, or the rowwise one the backward
        re-gathers under sequence parallelism) with its 1D block scales, not the BF16 input.

        TE 1.x (per-tensor FP8): ``_Linear.forward`` saves ``inputmat_t``, the FP8 transpose from
        ``fp8_cast_transpose_fused``, or with sequence parallelism the FP8 ``inputmat`` it
        re-gathers and transposes in the backward; ``_LayerNormLinear.forward`` saves the FP8
        ``ln_out`` that ``layernorm_fwd_fp8`` writes, next to the BF16 norm input, mu and rsigma
        (NVIDIA/TransformerEngine@0004dbd: transformer_engine/pytorch/module/linear.py and
        layernorm_linear.py, ``ctx.save_for_backward``). TE 2.x (every recipe): the quantised input
        is saved after ``update_usage(rowwise_usage=False)`` drops the rowwise data the backward
        does not read, unless ``save_original_input`` (off by default; Megatron-Core r0.9, whose
        TE v1.11 the stack profiles cite, has no such option) keeps the BF16 input instead.
        Per-tensor scales (one FP32 number a tensor) are not counted.

        ``gathered``: the input of a column-parallel GEMM under sequence parallelism, which the
        backward all-gathers again. Per-tensor FP8 quantises it rowwise only (its quantiser
        ``supports_only_rowwise_all_gather``) and transposes after the gather; MXFP8 and blockwise
        keep the columnwise view alone; an NVFP4 input keeps both views, as the drop of the rowwise
        one is limited to the other formats (NVIDIA/TransformerEngine@main, 2025:
        transformer_engine/pytorch/module/layernorm_linear.py, ``_LayerNormLinear.forward``: "For
        sequence parallel in vanilla FP8, rowwise data is to gather the input. For MXFP8,
        columnwise only data can be allgathered", ``update_usage(rowwise_usage=False)`` for
        ``MXFP8TensorStorage``/``Float8BlockwiseQTensorStorage`` or ``not ln_out_needs_gather``)."""
        element = self.dtype.bits / 8
        view = element if self.block == 0 else element + self.scale_bytes / self.block
        return 2 * view if gathered and self.dtype is Dtype.NVFP4 else view

    def weight_copy_bytes(self) -> Any:
        """Bytes per weight element of the quantised copies a module keeps next to its BF16 weight
        (TE's FP8 weight workspaces, docs performance_considerations "Memory usage": "2 MB
        (weight) + 1 MB (weight in FP8)" on Hopper, plus its transpose for the backward): the
        rowwise copy, the columnwise one unless one copy serves both (per-tensor or 2D-blocked
        FP8 on Blackwell), and the block scales."""
        element = self.dtype.bits / 8
        copies = 1 if self.any_layout and self.block in (0, 128) else 2
        per_block = 0 if self.weight_block == 0 else copies * self.scale_bytes / self.weight_block
        return copies * element + per_block

    def extra_weight_bytes(self, param_bytes: Any) -> Any:
        """Bytes per low-precision weight element beyond the ``param_bytes`` every parameter is
        counted at: the quantised copies next to the BF16 weight, or, with FP8 parameters, the
        copies in place of it (module docstring)."""
        copies = self.weight_copy_bytes()
        return copies - param_bytes if self.fp8_params else copies

    def gather_bytes(self, param_bytes: Any) -> Any:
        """Bytes per low-precision weight element in the distributed optimizer's parameter
        all-gather: the FP8 data (one byte) for FP8 parameters, else the parameter's own
        ``param_bytes`` (BF16 weights; MXFP8 parameters, gathered in BF16)."""
        return 1 if self.fp8_params and self.dtype is Dtype.FP8 else param_bytes

    def amax_history_bytes(self, modules: Any) -> Any:
        """FP32 amax history of delayed scaling over ``modules`` linear modules; other recipes
        keep none (current scaling and the block recipes scale from the tensor at hand)."""
        if self.scaling is not Fp8Scaling.DELAYED:
            return 0
        return 4 * AMAX_HISTORY * AMAX_TENSORS * modules
