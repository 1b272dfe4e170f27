"""Training the Transformer: loss, schedule, checkpoints, the loop and the run (lesson 07).

- :class:`LabelSmoothingLoss`, :func:`label_smoothed_nll`: section 5.4's label smoothing.
- :func:`transformer_lr`, :func:`transformer_scheduler`: section 5.3's warm-up schedule.
- :func:`paper_adam`, :func:`train_step`: section 5.3's Adam and one optimizer update, shared by the
  trainer, the ablations (lesson 10) and the benchmarks.
- :func:`save_checkpoint`, :func:`load_checkpoint`, :func:`load_model`,
  :func:`average_checkpoints`: atomic, ``weights_only``-safe checkpoints.
- :class:`TrainOptions`, :func:`train`: a whole run, as ``python -m minitransformer train``.
- :class:`Trainer`: the loop itself (accumulation, clipping, DDP, bf16, Ctrl-C).
- :mod:`.budget`: training in a time budget (``--minutes``): the speed measured, the steps planned and re-planned.
"""

from .checkpoint import (
    CheckpointError,
    atomic_torch_save,
    average_checkpoints,
    check_compatible,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    load_model,
    save_checkpoint,
)
from .loss import LabelSmoothingLoss, label_smoothed_nll
from .options import RECIPES, TrainOptions
from .run import TrainResult, save_loss_plot, train
from .runlog import loss_curves, read_log
from .schedule import WarmupInverseSqrt, transformer_lr, transformer_scheduler
from .step import paper_adam, train_step
from .trainer import DivergedError, Trainer

__all__ = [
    "CheckpointError",
    "DivergedError",
    "LabelSmoothingLoss",
    "RECIPES",
    "TrainOptions",
    "TrainResult",
    "Trainer",
    "WarmupInverseSqrt",
    "atomic_torch_save",
    "average_checkpoints",
    "check_compatible",
    "label_smoothed_nll",
    "latest_checkpoint",
    "list_checkpoints",
    "load_checkpoint",
    "load_model",
    "loss_curves",
    "paper_adam",
    "read_log",
    "save_checkpoint",
    "save_loss_plot",
    "train",
    "train_step",
    "transformer_lr",
    "transformer_scheduler",
]
