"""Why a published row cannot be scored: one reason per kind, with a row-specific detail."""

from __future__ import annotations

from enum import StrEnum


class SkipReason(StrEnum):
    """Kinds of unmodellable rows; ``llmp validate`` counts skips per kind."""

    DUPLICATE = "copy of an earlier row"
    """Every cell equal to an earlier row of the same file: the measurement is counted once."""
    FINE_TUNING = "fine-tuning task llmp does not model (preference optimisation)"
    """A fine-tuning run that is not one model's training step (DPO runs a reference model beside it);
    LoRA and SFT rows are predicted (:mod:`llmp.validate.finetuning`)."""
    CONTRADICTORY = "rows of one run disagree"
    """Two rows of one configuration give step times further apart than rounding explains: never
    averaged, the user keeps the row they trust."""
    NO_TIME_METRIC = "no time-like metric"
    MISSING_ARCHITECTURE = "missing architecture columns"
    MOE = "mixture-of-experts family unknown"
    MISSING_LAYOUT = "parallel layout not given"
    MISSING_BATCH = "batch or sequence length not given"
    UNSTATED_SPLIT = "pipeline split not given"
    """The layers do not divide the pipeline chunks and the row does not say how the stack split them."""
    CELL = "cell or note not understood"
    UNEXPRESSIBLE = "configuration llmp cannot express yet"
    UNKNOWN_UNIT = "metric unit not understood"
    UNKNOWN_METRIC = "metric name not understood"
    UNKNOWN_GPU = "hardware not in the catalog"
    UNSUPPORTED_DTYPE = "dtype without a peak in the catalog"
    SPEC_ERROR = "spec rejected"
    INFEASIBLE = "infeasible layout"
    PREDICT_ERROR = "predict cannot model it"
    CALIBRATION = "calibration does not apply"
    """``--calibration`` was fitted on another GPU or stack than the row's."""


class Unmodellable(Exception):
    """Raised while mapping a row that llmp cannot model; the mapping turns it into a skip."""

    def __init__(self, reason: SkipReason, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
