"""Perf metrics with known answers: per-token accuracy with padding, multi-label on logits and probabilities."""
from __future__ import annotations

import math

import pytest
import torch
from ignite.metrics import Metric

from ignite_seg.engine.scoring import MultiLabelAccuracy, Scorer, TokenAccuracy, perf_metric


def _score(metric: Metric, *batches) -> float:
    metric.reset()
    for b in batches:
        metric.update(b)
    return metric.compute()


def test_per_token_accuracy_ignores_padding():
    # N=2 sequences, C=3 classes, L=4; padding target -1. Sample 0: 3 real tokens, 2 right;
    # sample 1: 2 real tokens, 2 right; the padded positions are all "wrong" on purpose.
    out = torch.zeros(2, 3, 4)
    pred = torch.tensor([[0, 1, 2, 0], [2, 2, 1, 1]])
    out.scatter_(1, pred.unsqueeze(1), 1.0)
    y = torch.tensor([[0, 1, 1, -1], [2, 2, -1, -1]])
    assert _score(TokenAccuracy(ignore_index=-1), (out, y)) == pytest.approx(4 / 5)
    # without ignore_index the padding would count as wrong tokens
    assert _score(TokenAccuracy(), (out, y)) == pytest.approx(4 / 8)


def test_perf_metric_reads_ignore_index_from_the_loss():
    metric = perf_metric("classification", torch.nn.CrossEntropyLoss(ignore_index=-1))
    out = torch.tensor([[[5.0, 0.0]], [[0.0, 5.0]]]).transpose(1, 2)  # (N=1... ) -> (2, 2, 1)
    assert _score(metric, (out, torch.tensor([[0], [-1]]))) == 1.0


def test_one_hot_targets_and_plain_classification():
    out = torch.tensor([[2.0, 1.0], [0.0, 3.0], [1.0, 0.0]])
    assert _score(TokenAccuracy(), (out, torch.tensor([0, 1, 1]))) == pytest.approx(2 / 3)
    assert _score(TokenAccuracy(), (out, torch.tensor([[1.0, 0], [0, 1], [0, 1]]))) == pytest.approx(2 / 3)


def test_multiclass_logits_of_a_bce_with_logits_model_score_perfectly():
    # the case: perfect logits of +-0.3 (old code thresholded them at 0.5: 0.417)
    y = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0], [0.0, 1.0, 0.0]])
    logits = torch.where(y > 0.5, 0.3, -0.3)
    assert _score(perf_metric("multiclass", torch.nn.BCEWithLogitsLoss()), (logits, y)) == 1.0
    assert _score(perf_metric("multiclass", torch.nn.BCELoss()), (torch.sigmoid(logits), y)) == 1.0
    # an unknown loss: decided from the outputs (logits leave [0, 1], probabilities do not)
    assert _score(MultiLabelAccuracy(), (torch.where(y > 0.5, 2.0, -2.0), y)) == 1.0
    assert _score(MultiLabelAccuracy(), (torch.where(y > 0.5, 0.9, 0.2), y)) == 1.0


def test_multiclass_known_partial_answer():
    y = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    probs = torch.tensor([[0.9, 0.7], [0.2, 0.8]])  # sample 0: 1 of 2 right, sample 1: 1 of 2
    assert _score(MultiLabelAccuracy(threshold=0.5), (probs, y)) == pytest.approx(0.5)


def test_scorer_measures_loss_perf_and_custom_metrics_and_restores_training_mode():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    model.train()
    x, y = torch.randn(10, 3), torch.randint(0, 2, (10,))
    loss_fn = torch.nn.CrossEntropyLoss()

    class Count(Metric):
        def reset(self):
            self.n = 0

        def update(self, output):
            self.n += len(output[1])

        def compute(self):
            return self.n

    scorer = Scorer(loss_fn, "classification", extra={"count": Count()})
    got = scorer.measure(model, [(x[:6], y[:6]), (x[6:], y[6:])])
    with torch.no_grad():
        out = model(x)
    assert got["loss"] == pytest.approx(float(loss_fn(out, y)), rel=1e-6)
    assert got["perf"] == pytest.approx(float((out.argmax(1) == y).float().mean()))
    assert got["count"] == 10 and model.training
    inv = Scorer(loss_fn, "inv-loss").measure(model, [(x, y)])
    assert inv["perf"] == pytest.approx(1 / (1 + inv["loss"]))
    with pytest.raises(ValueError, match="reserved"):
        Scorer(loss_fn, "classification", extra={"loss": Count()})


def test_the_loss_is_the_batch_size_weighted_mean_of_the_float32_batch_losses_summed_in_float64():
    from ignite_seg.engine.scoring import SumLoss

    torch.manual_seed(0)
    loss_fn = torch.nn.MSELoss()
    batches = [(torch.randn(n, 3), torch.randn(n, 3)) for n in (7, 64, 33, 5)]
    metric = SumLoss(loss_fn)
    metric.reset()
    for out, y in batches:
        metric.update((out, y))
    expected = sum(float(loss_fn(out, y).item()) * len(y) for out, y in batches) / sum(len(y) for _, y in batches)
    assert metric.compute() == expected  # exactly: the old plain-loop evaluation's numbers


def test_measure_parts_switches_the_model_to_eval_once_and_measures_each_part_like_measure():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Dropout(0.5), torch.nn.Linear(4, 2))
    switches = []
    model.train = lambda mode=True, _train=model.train: (switches.append(mode), _train(mode))[1]
    parts = {p: [(torch.randn(n, 3), torch.randint(0, 2, (n,)))] for p, n in (("train", 7), ("val", 5), ("val_b", 3))}
    scorer = Scorer(torch.nn.CrossEntropyLoss(), "classification")
    model.train()
    switches.clear()
    got = scorer.measure_parts(model, parts)
    assert switches == [False, True] and model.training  # eval() once, then the mode restored
    assert got == {part: scorer.measure(model, batches) for part, batches in parts.items()}


@pytest.mark.parametrize("ignore_index", [-100, 1])
def test_padding_never_counts_whether_or_not_its_index_is_a_class(ignore_index):
    out = torch.tensor([[[3.0, 0.0, 0.0, 0.0], [0.0, 3.0, 3.0, 0.0], [0.0, 0.0, 0.0, 3.0]]])  # (N=1, C=3, L=4): 0, 1, 1, 2
    y = torch.tensor([[0, ignore_index, ignore_index, 0]])  # one right, two padding (predicted 1), one wrong
    assert _score(TokenAccuracy(ignore_index=ignore_index), (out, y)) == 0.5


@pytest.mark.parametrize("style,loss_fn,y", [
    ("classification", torch.nn.CrossEntropyLoss(), torch.tensor([0, 2, 1, 2, 0])),
    ("multiclass", torch.nn.BCEWithLogitsLoss(), torch.tensor([[1.0, 0, 1], [0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 0, 0]])),
])
def test_in_one_process_own_metrics_skip_ignites_all_reduce_wrapper_and_give_what_compute_gives(monkeypatch, style,
                                                                                                 loss_fn, y):
    import ignite.distributed as idist
    from ignite.metrics import Loss

    torch.manual_seed(0)
    model, x = torch.nn.Linear(4, 3), torch.randn(5, 4)
    scorer = Scorer(loss_fn, style, {"user_loss": Loss(loss_fn)})
    asked = []
    world_size = idist.get_world_size
    monkeypatch.setattr(idist, "get_world_size", lambda: asked.append(1) or world_size())
    got = scorer.measure(model, [(x, y)])
    assert len(asked) == 1  # the user's ignite metric reduces as ignite does; loss and perf do not ask
    with torch.no_grad():
        out = model(x)
    for name, metric in scorer.metrics.items():
        assert got[name] == _score(metric, (out, y))  # compute() with its reduction: the same value, bit for bit


def test_the_perf_grain_is_one_counted_token_one_label_or_nothing_for_a_loss():
    # padded sequences: 5 real tokens of 8 positions -> one token moves the accuracy by 1/5
    tagger = Scorer(torch.nn.CrossEntropyLoss(ignore_index=-1), "classification")
    tagger.measure(torch.nn.Identity(), [(torch.zeros(2, 3, 4), torch.tensor([[0, 1, 1, -1], [2, 2, -1, -1]]))])
    assert tagger.perf_grain() == pytest.approx(1 / 5)
    # multi-label: 4 items x 6 labels -> one label of one item moves it by 1/24
    tags = Scorer(torch.nn.BCEWithLogitsLoss(), "multiclass")
    tags.measure(torch.nn.Identity(), [(torch.zeros(4, 6), torch.ones(4, 6))])
    assert tags.perf_grain() == pytest.approx(1 / 24)
    regression = Scorer(torch.nn.MSELoss(), "inv-loss")
    regression.measure(torch.nn.Identity(), [(torch.zeros(4, 1), torch.ones(4, 1))])
    assert regression.perf_grain() == 0.0


def test_inv_loss_perf_of_a_loss_below_zero_stays_ordered_and_bounded():
    from ignite_seg.engine.scoring import inv_loss_perf

    losses = [50.0, 1.0, 0.0, -0.5, -0.999, -1.0, -20.0]
    perfs = [inv_loss_perf(v) for v in losses]
    assert perfs == sorted(perfs) and all(0 < p < 2 for p in perfs)  # 1 / (1 + loss): inf at -1, -0.05 at -20
    assert inv_loss_perf(0.0) == 1.0 and inv_loss_perf(1.0) == 0.5 and inv_loss_perf(-1.0) == 1.5
    m = perf_metric("inv-loss", torch.nn.PoissonNLLLoss())
    m.update((torch.full((4, 1), 3.0), torch.full((4, 1), 9.0)))  # exp(3) - 27 = -6.91
    assert m.compute() == pytest.approx(2.0 - 1.0 / (1.0 + 27.0 - math.exp(3.0)))
