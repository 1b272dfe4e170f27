"""The training loop: token batches, accumulation, clipping, DDP, bf16, checkpoints (lesson 07).

:class:`Trainer` trains a run that :func:`minitransformer.training.train` built, until its epochs, step
limit or quality target (:mod:`.stopping`), or a Ctrl-C. Its progress bar is plain text, so it also reads
in RISE slides; ``TQDM_DISABLE=1`` silences it.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..data import Batch, SharedTokenizer, TokenBatchSampler, collate_pairs
from ..evaluation import METRICS, translate_sentences
from ..model import Transformer
from .checkpoint import atomic_copy, capture_rng_state, save_checkpoint
from .checkpoint_files import BEST, checkpoint_path, list_checkpoints
from .corpus import IdPairs, Pairs
from .distributed import DistInfo, StopRequest, all_gather_objects, all_reduce_sum, barrier
from .loss import label_smoothed_nll
from .budget import TimeBudget, plan_steps, run_seconds, step_seconds, worth_replanning
from .step import diverged, train_step
from .cpu import (SLOW_RUN_SECONDS, CpuEstimate, SlowRunError, choose_threads, duration, estimate_cpu_run,
                  slow_run_message)
from .options import TrainOptions
from .runlog import RunLog
from .schedule import planned_schedule
from .stopping import check_steps, finished_reason, stop_rule

class DivergedError(RuntimeError):
    """Training met a non-finite loss (or gradient): it stopped before that step changed the weights."""


RUNNING_ZERO = dict(epoch_loss=0.0, epoch_tokens=0.0, loss=0.0, nll=0.0, tgt=0, all=0)


def _in_jupyter_kernel() -> bool:
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return type(shell).__name__ == "ZMQInteractiveShell"


class Trainer:
    """Trains a model on token batches and evaluates it after every epoch."""

    clock = staticmethod(time.perf_counter)  # of the time limits; a test gives a clock of its own

    def __init__(self, model: Transformer, module: nn.Module, tokenizer: SharedTokenizer,
                 optimizer: torch.optim.Optimizer, scheduler: torch.optim.lr_scheduler.LRScheduler,
                 train_ids: IdPairs, valid_ids: IdPairs, valid_pairs: Pairs, metric: str,
                 options: TrainOptions, device: torch.device, info: DistInfo, log: RunLog,
                 bf16: bool = False) -> None:
        self.model, self.module, self.tokenizer = model, module, tokenizer
        self.optimizer, self.scheduler = optimizer, scheduler
        self.train_ids, self.valid_ids, self.valid_pairs = train_ids, valid_ids, valid_pairs
        self.metric, self.options, self.device, self.info, self.log = metric, options, device, info, log
        self.bf16 = bf16
        self.out = Path(options.out or ".")
        self.budget = options.batch_tokens or 4096
        if not train_ids:
            raise ValueError(f"batch_tokens={self.budget} holds no training pair: each has a side longer than "
                             "that (pairs too long for a batch are left out); expected a budget of at least "
                             "the longest sentence's tokens (the dates recipe uses 2000)")
        if not valid_ids:
            files = f" ({options.valid_src_file}, {options.valid_tgt_file})" if options.dataset == "text" else ""
            raise ValueError(f"the validation split{files} is empty: expected at least one sentence pair")
        self.sampler = TokenBatchSampler([len(s) for s, _ in train_ids], [len(t) for _, t in train_ids],
                                         self.budget, shuffle=True, seed=options.seed,
                                         rank=info.rank, world_size=info.world_size)
        longest = max(max(len(s), len(t)) for s, t in valid_ids)
        self.valid_sampler = TokenBatchSampler([len(s) for s, _ in valid_ids], [len(t) for _, t in valid_ids],
                                               max(self.budget, longest), shuffle=False,
                                               rank=info.rank, world_size=info.world_size)
        self.step = self.epoch = self.batches_done = 0
        self.metrics: dict[str, Any] = {}
        self.saved_step = -1
        self.grad_norm: torch.Tensor | None = None
        # Sums of the epoch in progress, kept in checkpoints: a resumed run logs the averages of an uninterrupted one.
        self.running: dict[str, float] = dict(RUNNING_ZERO)
        self.stop: StopRequest | None = None
        self.on_save: Callable[[Path], None] | None = None  # called after each checkpoint is written
        self.deadline: float | None = None  # clock() time set by options.time_budget or minutes
        self.time_up = False  # agreed by all processes, so that they stop at the same step
        self.timer: TimeBudget | None = None  # with options.minutes; the plan is metrics["planned_steps"]

        self.threads, self.threads_reason = choose_threads(options.threads, device, model.num_parameters())
        torch.set_num_threads(self.threads)
        self.cpu_estimate: CpuEstimate | None = None  # set on a CPU (the setup line reports it)
        if device.type == "cpu":
            self._check_cpu_time()

    def _check_cpu_time(self) -> None:
        """Refuse (or, with ``allow_slow``, announce) a CPU run estimated to take hours."""
        o, parameters = self.options, self.model.num_parameters()
        if o.minutes is not None or o.time_budget is not None:  # the budget bounds the run
            return
        tokens = self.tokens_per_step()
        estimate = estimate_cpu_run(parameters, tokens, self.steps_per_epoch(), o.epochs, o.max_steps, o.keep)
        self.cpu_estimate = estimate
        if estimate.run_seconds <= SLOW_RUN_SECONDS:
            return
        message = slow_run_message(estimate, parameters, self.steps_per_epoch(), self.device)
        if not o.allow_slow:
            raise SlowRunError(message)
        if self.info.is_main:
            print(f"warning: {message.replace(', or pass --allow-slow (allow_slow=True) to start it anyway', '')}"
                  "; starting it because --allow-slow was given", file=sys.stderr, flush=True)

    # --- pieces -----------------------------------------------------------------
    def autocast(self) -> contextlib.AbstractContextManager:
        """bf16 autocast when asked for, else nothing."""
        if not self.bf16:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)

    def collate(self, indices: list[int], pairs: IdPairs) -> Batch:
        """The padded :class:`Batch` of some pairs, on this process's device."""
        tok = self.tokenizer
        return collate_pairs([pairs[i] for i in indices], tok.pad_id, tok.bos_id, tok.eos_id).to(
            self.device, non_blocking=True)

    def tokens_per_step(self) -> int:
        """Tokens of one side (padding included) per optimizer step, as the real batches hold them.

        At most ``batch_tokens * accumulate * processes``; less when the data cannot fill the
        budget (a budget of 10**12 tokens on 20,000 dates makes one batch of the whole data).
        """
        batches = self.sampler.all_batches()
        src, tgt = self.sampler.src_lengths, self.sampler.tgt_lengths
        padded = sum(len(b) * max(max(src[i], tgt[i]) for i in b) for b in batches if b)
        steps = max(1, math.ceil(len(batches) / self.options.accumulate))
        return max(1, min(self.budget * self.options.accumulate * self.info.world_size, round(padded / steps)))

    def steps_per_epoch(self) -> int:
        """Optimizer steps in one epoch (the exact count varies by a step or so between epochs)."""
        return math.ceil(len(self.sampler) / self.options.accumulate)

    def check_steps(self) -> set[int]:
        """Steps into an epoch (1-based) after which the quality target is checked (see :func:`.stopping.check_steps`)."""
        return check_steps(self.options, self.steps_per_epoch())

    def _windows(self) -> Iterator[tuple[int, list[list[int]]]]:
        """This epoch's batches in groups of ``accumulate``, from ``batches_done`` on."""
        self.sampler.set_epoch(self.epoch)
        batches = list(self.sampler)
        acc = self.options.accumulate
        for start in range(self.batches_done, len(batches), acc):
            yield start + len(batches[start : start + acc]), batches[start : start + acc]

    # --- training ---------------------------------------------------------------
    def train_step(self, window: list[list[int]], global_tokens: float) -> tuple[torch.Tensor, torch.Tensor, int, int]:
        """One optimizer update over the batches of ``window`` (this process's share)."""
        batches = [self.collate(indices, self.train_ids) for indices in window]
        n_tgt = sum(batch.n_tgt_tokens for batch in batches)
        n_all = sum(batch.n_src_tokens + batch.n_tgt_tokens for batch in batches)

        def check(loss: torch.Tensor, grad_norm: torch.Tensor | None) -> None:
            self.grad_norm = grad_norm
            self._check_finite(loss, n_tgt)

        loss, nll, _ = train_step(self.module, batches, self.optimizer, scheduler=self.scheduler,
                                  scale=self.info.world_size / global_tokens,  # DDP averages over processes
                                  label_smoothing=self.options.label_smoothing, pad_id=self.tokenizer.pad_id,
                                  clip_norm=self.options.clip_norm, autocast=self.autocast,
                                  no_sync=self.module.no_sync if self.info.enabled else None, check=check)
        return loss, nll, n_tgt, n_all

    def _check_finite(self, loss: torch.Tensor, n_tgt: int) -> None:
        """Stop with :class:`DivergedError` before a step with a non-finite loss or gradient changes the weights.

        The newest checkpoint then still holds the last finite weights. All processes agree
        (one flag summed over them), so that they stop at the same step.
        """
        flag = float(diverged(loss, self.grad_norm))
        if self.info.enabled:
            (flag,) = all_reduce_sum([flag], self.info, self.device)
        if not flag:
            return
        self.optimizer.zero_grad(set_to_none=True)
        step, lr = self.step + 1, self.scheduler.get_last_lr()[0]
        value = loss.item() / max(n_tgt, 1)
        self.log.write("diverged", step=step, loss=value, lr=lr,
                       grad_norm=float(self.grad_norm) if self.grad_norm is not None else None)
        found = list_checkpoints(self.out) if self.info.is_main else []
        kept = (f"the newest checkpoint, {found[-1]}, holds the last finite weights" if found
                else "no checkpoint had been written yet")
        raise DivergedError(
            f"training diverged: the loss of step {step:,} is {value} (learning rate {lr:.3g}), so the run stopped "
            f"before that step changed the weights; {kept}. Lower --lr-factor or lengthen --warmup, then start "
            "afresh (--overwrite) or --resume with those options")

    def run(self, stop: StopRequest) -> bool:
        """Train until the end; returns True when stopped by a signal (a checkpoint is written)."""
        o = self.options
        self.stop = stop
        if o.minutes is not None:
            self.timer = TimeBudget(60 * o.minutes, self.metrics.get("train_seconds", 0.0),
                                    self.metrics.get("validation_seconds"), self.clock)
            self.deadline = self.timer.origin + self.timer.seconds  # a safety net: the plan ends the run first
        else:
            self._fixed_plan()
        if o.time_budget is not None:
            self.deadline = self.clock() + o.time_budget
        epochs = o.epochs if o.epochs is not None else 10**9
        finished = self.finished()
        if finished and self.info.is_main:
            print(f"nothing left to train: the run stopped at step {self.step:,} because {finished}", flush=True)
        elif self.info.is_main and self.step == 0:
            print(f"training {self.stop_rule()}", flush=True)
        elif self.timer is not None:
            used = self.timer.used()
            self._say(f"{duration(max(self.timer.seconds - used, 0))} of the {o.minutes:g}-minute budget left "
                      f"({used:.0f} s used before)")
        while self.epoch < epochs and not self._done():
            with self._progress_bar() as bar:  # closed (and wiped) before the epoch's line is printed
                self._bar = bar  # the checks inside the epoch print their lines above it (_say)
                try:
                    interrupted = self._train_epoch(bar, stop)
                finally:
                    self._bar = None
            if interrupted:
                self.log.write("interrupted", step=self.step, epoch=self.epoch, signal=stop.signal_name)
                self.save()
                return True
            if self.batches_done == 0:  # the epoch was completed
                if self._end_of_epoch():
                    break
        if self.metrics.get("eval_step") != self.step and not finished:  # stopped inside an epoch by max_steps
            self._end_of_epoch()
        if self.saved_step != self.step:
            self.save()
        if self.timer is not None and not finished:
            used = self.metrics["train_seconds"] = self.timer.used()
            self._say(f"trained {self.step:,} steps in {used:.1f} s of the {o.minutes:g}-minute budget "
                      f"({60 * o.minutes:.0f} s)")
        return False

    def _fixed_plan(self) -> None:
        """Without a budget, a schedule that ends on a planned step ends with --max-steps or --epochs."""
        o, schedule = self.options, planned_schedule(self.scheduler)
        ends = [n for n in (o.max_steps, o.epochs and o.epochs * self.steps_per_epoch()) if n]
        if schedule is not None and ends and schedule.total != min(ends):
            schedule.replan(min(ends), self.step)

    def _plan(self) -> None:
        """Plan (again) how many steps fit in the budget's time left, from the recent step and validation times.

        The schedule follows the plan. A plan is kept unless the new one moves its end by more than noise, and
        a plan that is reached is final: a rate that has reached zero stays there.
        """
        b, o, info, old = self.timer, self.options, self.info, self.metrics.get("planned_steps")
        if b is None or not b.ready() or (old is not None and self.step >= old):
            return
        # The processes agree on one plan (the mean of their figures), so that they stop at the same step.
        figures = [b.used(), step_seconds(b.durations) or 0.0, b.eval_seconds or 0.0]
        used, per_step, per_eval = (x / info.world_size for x in all_reduce_sum(figures, info, self.device))
        epoch = self.steps_per_epoch()
        where = dict(step=self.step, into_epoch=math.ceil(self.batches_done / o.accumulate), steps_per_epoch=epoch,
                     offsets=sorted(self.check_steps() | {epoch}))
        total = plan_steps(seconds_left=b.seconds - used, step_seconds=per_step, eval_seconds=per_eval, **where)
        if old is not None and not worth_replanning(old, total, self.step):
            return
        self.metrics["planned_steps"] = total
        if (schedule := planned_schedule(self.scheduler)) is not None:
            schedule.replan(total, self.step)
        seconds = run_seconds(total - self.step, per_step, per_eval, **where)
        ends = time.strftime("%H:%M:%S", time.localtime(time.time() + seconds))
        self.log.write("plan", step=self.step, planned_steps=total, previous=old, epochs=total / epoch,
                       step_seconds=per_step, eval_seconds=b.eval_seconds, used_seconds=used,
                       budget_seconds=b.seconds, seconds_left=seconds, ends_at=ends)
        validation = ("validation not timed yet" if b.eval_seconds is None
                      else f"{per_eval:.1f} s per validation")
        if old is None:
            self._say(f"plan: {total:,} steps ({total / epoch:.1f} epochs) at {per_step:.3f} s a step, "
                      f"{validation}: training ends at about {ends} (in {duration(seconds)}), then the test")
        elif abs(total - old) >= 0.05 * old:  # the log has every re-plan; the screen, those that matter
            self._say(f"re-plan at step {self.step:,}: {total:,} steps instead of {old:,} ({per_step:.3f} s a step, "
                      f"{validation})")

    def _stops_here(self) -> bool:
        """True when the step just taken is the last: a step limit, the time budget or its plan."""
        o, planned = self.options, self.metrics.get("planned_steps")
        return (self.time_up or (o.max_steps is not None and self.step >= o.max_steps)
                or (self.timer is not None and planned is not None and self.step >= planned))

    def _done(self) -> bool:
        o = self.options
        if self._stops_here():
            return True
        reached = self.metrics.get("val_" + self.metric, -math.inf)
        return o.target is not None and o.target > 0 and reached >= o.target

    def finished(self) -> str | None:
        """Why the run has nothing left to train, or None (see :func:`finished_reason`)."""
        return finished_reason(self.options, self.step, self.epoch, self.batches_done, self.metrics, self.metric)

    def stop_rule(self) -> str:
        """When training stops, in words (see :func:`.stopping.stop_rule`)."""
        return stop_rule(self.options, self.metric, self.steps_per_epoch())

    def _progress_bar(self) -> Any:
        """A text bar over this epoch's steps (not widgets: they fail in RISE slides), on the main process."""
        from tqdm.std import tqdm  # imported here: importing the package must stay free of side effects

        o = self.options
        total = self.steps_per_epoch()
        done = math.ceil(self.batches_done / o.accumulate)
        for limit in (o.max_steps, self.metrics.get("planned_steps") if self.timer is not None else None):
            if limit is not None:
                total = max(done, min(total, done + limit - self.step))
        title = f"epoch {self.epoch + 1}" + (f"/{o.epochs}" if o.epochs is not None else "")
        silent = os.environ.get("TQDM_DISABLE", "").lower() in ("1", "true", "yes") or not self.info.is_main
        # In Jupyter, stdout: stderr is drawn on a red background there, which reads as an error.
        out = sys.stdout if _in_jupyter_kernel() else sys.stderr
        return tqdm(total=total, initial=done, desc=title, unit="step", leave=False, disable=silent, file=out,
                    dynamic_ncols=True, mininterval=0.5)

    def _say(self, line: str) -> None:
        """Print a result line on the main process; while an epoch's bar is drawn, on a line of its own.

        A plain print would land after the bar's text on the same line (the bar ends with a carriage
        return, not a newline), gluing the two in a notebook or terminal. ``tqdm.write`` wipes the
        bar, prints the line and draws the bar again below it.
        """
        if not self.info.is_main:
            return
        bar = getattr(self, "_bar", None)
        if bar is not None and not bar.disable:
            bar.write(line, file=sys.stdout)
            sys.stdout.flush()
        else:
            print(line, flush=True)

    def _train_epoch(self, bar: Any, stop: StopRequest) -> bool:
        o, info = self.options, self.info
        r = self.running
        epoch_loss, epoch_tokens = r["epoch_loss"], r["epoch_tokens"]
        since_loss = torch.tensor(r["loss"], device=self.device)
        since_nll = torch.tensor(r["nll"], device=self.device)
        since_tgt, since_all = int(r["tgt"]), int(r["all"])
        since_time = time.perf_counter()

        def keep_sums() -> None:
            self.running = dict(epoch_loss=epoch_loss, epoch_tokens=epoch_tokens, loss=since_loss.item(),
                                nll=since_nll.item(), tgt=since_tgt, all=since_all)
        self.module.train()
        checks = self.check_steps()
        for done, window in self._windows():
            local_tokens = sum(len(self.train_ids[i][1]) for b in window for i in b)
            late = self.deadline is not None and self.clock() >= self.deadline
            global_tokens, stop_votes, late_votes = all_reduce_sum([local_tokens, float(stop.requested), float(late)],
                                                                   info, self.device)
            if stop_votes > 0:
                keep_sums()
                return True
            self.time_up = self.time_up or late_votes > 0  # this step is the last one
            loss, nll, n_tgt, n_all = self.train_step(window, global_tokens)
            self.step += 1
            self.batches_done = done
            since_loss += loss
            since_nll += nll
            since_tgt += n_tgt
            since_all += n_all
            bar.update(1)
            if self.timer is not None:
                self.timer.step_done()
                if self.step % o.log_every == 0 or "planned_steps" not in self.metrics:
                    self._plan()
            planned = self.metrics.get("planned_steps") if self.timer is not None else None
            if self.step % o.log_every == 0 or self.step in (o.max_steps, planned):
                seconds = time.perf_counter() - since_time
                mean_loss = since_loss.item() / max(since_tgt, 1)
                lr = self.scheduler.get_last_lr()[0]
                tokens_per_s = since_all * info.world_size / max(seconds, 1e-9)
                tgt_tokens_per_s = since_tgt * info.world_size / max(seconds, 1e-9)
                bar.set_postfix(loss=f"{mean_loss:.3f}", lr=f"{lr:.2e}", tok_s=f"{tokens_per_s:,.0f}", refresh=False)
                grad = float(self.grad_norm) if self.grad_norm is not None else None
                self.log.write("train", step=self.step, epoch=self.epoch, loss=mean_loss,
                               nll=since_nll.item() / max(since_tgt, 1), lr=lr, tokens_per_s=tokens_per_s,
                               tgt_tokens_per_s=tgt_tokens_per_s, grad_norm=grad)
                epoch_loss += since_loss.item()
                epoch_tokens += since_tgt
                since_loss.zero_()
                since_nll.zero_()
                since_tgt = since_all = 0
                since_time = time.perf_counter()
            if o.save_every and self.step % o.save_every == 0:
                keep_sums()
                self.save()
            if self._stops_here():
                break
            if math.ceil(done / o.accumulate) in checks and done < len(self.sampler):
                # A check inside the epoch: the training loss so far in this epoch, then validation.
                loss_sum, tokens = all_reduce_sum([epoch_loss + since_loss.item(), epoch_tokens + since_tgt],
                                                  info, self.device)
                self.metrics["train_loss"] = loss_sum / max(tokens, 1)
                keep_sums()  # the checkpoint written by the check resumes from here
                reached = self._end_of_epoch(inside=True)
                self.module.train()
                if reached:
                    break
        else:
            self.batches_done = 0
        if self.batches_done >= len(self.sampler):  # max_steps fell on the epoch's last batch
            self.batches_done = 0
        epoch_loss += since_loss.item()
        epoch_tokens += since_tgt
        since_loss.zero_()
        since_nll.zero_()
        since_tgt = since_all = 0
        keep_sums()
        if self.batches_done == 0:
            self.running = dict(RUNNING_ZERO)
        loss_sum, tokens = all_reduce_sum([epoch_loss, epoch_tokens], info, self.device)
        self.metrics["train_loss"] = loss_sum / max(tokens, 1)
        if self.batches_done == 0:
            self.epoch += 1
        return False

    def _end_of_epoch(self, inside: bool = False) -> bool:
        """Validate, log one line, write a checkpoint; True when the quality target is reached.

        Also runs after the last step when ``max_steps`` stops training inside an epoch, and
        with ``inside=True`` at the checks inside an epoch (``checks_per_epoch``), which write a
        checkpoint (and count for the best one) only when they reach the target and end the run.
        """
        start = self.clock()
        val_loss, val_nll = self.validation_loss()
        quality = self.validation_quality()
        self.metrics.update({"val_loss": val_loss, "val_nll": val_nll, "eval_step": self.step,
                             "val_" + self.metric: quality})
        self.log.write("epoch", step=self.step, epoch=self.epoch, train_loss=self.metrics["train_loss"],
                       val_loss=val_loss, val_nll=val_nll, **{"val_" + self.metric: quality},
                       lr=self.scheduler.get_last_lr()[0], eval_seconds=self.clock() - start)
        shown = f"{100 * quality:.1f}%" if self.metric == "exact_match" else f"{quality:.2f}"
        name = "exact match" if self.metric == "exact_match" else "BLEU"
        part = self.batches_done / len(self.sampler)
        epoch = f"{self.epoch:5d}" if part == 0 else f"{self.epoch + part:5.1f}"
        line = (f"epoch {epoch}  step {self.step:6d}  train loss {self.metrics['train_loss']:.3f}  "
                f"val loss {val_loss:.3f}  {name} {shown}")
        o = self.options
        if o.target is not None and o.target > 0 and quality >= o.target:
            line += "  (target reached: done)"
        self._say(line)
        if inside and not self._done():
            self._validated(start)
            return False
        improved = quality > self.metrics.get("best_val_" + self.metric, -math.inf)
        if improved:
            self.metrics["best_val_" + self.metric] = quality
        # best.pt is the model the run hands on (its test, translate, export). A rate that decays to zero at the
        # planned end makes the final weights that model: between its last epochs, a greedy validation of a few
        # hundred sentences differs by noise, and the decayed tail is what the plan paid for.
        kept = improved or o.lr_schedule == "linear_decay"
        if kept:
            self.metrics["best_step"] = self.step
        self.save(best=kept)
        self._validated(start)
        return self._done()

    def _validated(self, start: float) -> None:
        """With a budget: time the validation (and checkpoint) that began at ``start``, and plan again."""
        if self.timer is not None:
            self.timer.eval_done(self.clock() - start)
            self._plan()

    # --- evaluation -------------------------------------------------------------
    @torch.no_grad()
    def validation_loss(self) -> tuple[float, float]:
        """Label-smoothed loss and plain NLL per target token over the validation pairs."""
        self.model.eval()
        sums = torch.zeros(3, dtype=torch.float64, device=self.device)  # loss, nll, tokens
        for indices in self.valid_sampler:
            batch = self.collate(indices, self.valid_ids)
            with self.autocast():
                logits = self.model(batch.src, batch.tgt_in)
            sums += torch.stack(label_smoothed_nll(logits, batch.tgt_out, self.options.label_smoothing,
                                                   self.tokenizer.pad_id)).double()
        self.model.train()
        loss, nll, tokens = all_reduce_sum(sums.tolist(), self.info, self.device)
        return loss / max(tokens, 1), nll / max(tokens, 1)

    def translate(self, sentences: list[str], batch_size: int = 250, beam_size: int = 1,
                  alpha: float = 0.6) -> list[str]:
        """Greedy (or beam search) translations, the sentences shared out among the processes."""
        mine = sentences[self.info.rank :: self.info.world_size]
        if beam_size > 1:
            batch_size = max(1, batch_size // beam_size)  # each sentence holds beam_size rows
        with self.autocast():
            out = translate_sentences(self.model, self.tokenizer, mine, self.device, batch_size, beam_size=beam_size,
                                      alpha=alpha)
        self.model.train()
        parts = all_gather_objects(out, self.info)
        merged: list[str] = [""] * len(sentences)
        for rank, part in enumerate(parts):
            merged[rank :: self.info.world_size] = part
        return merged

    def validation_quality(self) -> float:
        """Exact match (0-1) or BLEU (0-100) of greedy translations of validation sentences."""
        o = self.options
        given = [n for n in (o.eval_sentences, o.valid_sentences) if n is not None]
        pairs = self.valid_pairs[: min(given) if given else None]
        hypotheses = self.translate([s for s, _ in pairs])
        return METRICS[self.metric](hypotheses, [t for _, t in pairs])

    # --- checkpoints ------------------------------------------------------------
    def save(self, best: bool = False) -> Path | None:
        """Write a checkpoint of the current step (main process) and keep the newest ``keep``."""
        if self.timer is not None:  # a resumed run spends only what is left, and knows what validation costs
            self.metrics["train_seconds"] = self.timer.used()
            if self.timer.eval_seconds is not None:
                self.metrics["validation_seconds"] = self.timer.eval_seconds
        states = all_gather_objects(capture_rng_state(), self.info)
        running = all_gather_objects(self.running, self.info)
        path = None
        if self.info.is_main:
            # A second Ctrl-C waits until the files are complete (see StopRequest.shield).
            with self.stop.shield() if self.stop is not None else contextlib.nullcontext():
                path = save_checkpoint(
                    checkpoint_path(self.out, self.step), self.model, self.tokenizer, optimizer=self.optimizer,
                    scheduler=self.scheduler, step=self.step, epoch=self.epoch, batches_done=self.batches_done,
                    rng=states, options=self.options.to_dict(), metrics=self.metrics, running=running,
                )
                if best:
                    atomic_copy(path, self.out / BEST)
                for old in list_checkpoints(self.out)[: -self.options.keep]:
                    old.unlink(missing_ok=True)
                self.log.write("checkpoint", step=self.step, epoch=self.epoch, path=str(path))
                if self.on_save is not None:
                    self.on_save(path)
        self.saved_step = self.step
        barrier(self.info)
        return path
