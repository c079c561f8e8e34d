"""The gradient noise scale estimators on synthetic gradients with known tr(Σ) and |G|²."""
from __future__ import annotations

import numpy as np
import pytest

from ignite_seg.tuning.noise_scale import (
    ema,
    noise_scale,
    pooled_noise_scale,
    running_noise_scale,
    two_batch_estimates,
    typical_noise_scale,
)


def batch_sq_norms(rng, g, sigma, b, n):
    """Squared norms of ``n`` batch-mean gradients of ``b`` per-example gradients ``g + noise``."""
    per_example = g + rng.normal(size=(n, b, g.size)) * sigma  # per-example covariance diag(sigma²)
    mean = per_example.mean(axis=1)
    return (mean**2).sum(axis=1)


def test_exact_expectations_give_exact_answers():
    g2, trace, b_s, b_b = 2.0, 300.0, 8, 64
    sq_s, sq_b = np.array([g2 + trace / b_s]), np.array([g2 + trace / b_b])
    est_g2, est_tr = two_batch_estimates(sq_s, sq_b, b_s, b_b)
    assert est_g2[0] == pytest.approx(g2) and est_tr[0] == pytest.approx(trace)
    assert noise_scale(sq_s, sq_b, b_s, b_b) == pytest.approx(trace / g2)


def test_unbiased_on_synthetic_gradients_with_known_noise_scale():
    rng = np.random.default_rng(0)
    dim = 50
    g = rng.normal(size=dim) * 0.2  # |G|² ≈ 2
    sigma = rng.uniform(0.5, 1.5, size=dim)
    true_g2, true_tr = float(g @ g), float((sigma**2).sum())
    sq_s = batch_sq_norms(rng, g, sigma, 8, 4000)
    sq_b = batch_sq_norms(rng, g, sigma, 32, 4000)
    est_g2, est_tr = two_batch_estimates(sq_s, sq_b, 8, 32)
    assert est_g2.mean() == pytest.approx(true_g2, rel=0.1)
    assert est_tr.mean() == pytest.approx(true_tr, rel=0.05)
    assert noise_scale(sq_s, sq_b, 8, 32) == pytest.approx(true_tr / true_g2, rel=0.12)
    # one estimate alone is very noisy (this is why numerator and denominator are averaged first)
    assert (est_g2 < 0).any()


def test_running_estimate_converges_and_mask_selects():
    rng = np.random.default_rng(1)
    dim = 20
    g = np.full(dim, 0.5)
    sigma = np.ones(dim)
    sq_s = batch_sq_norms(rng, g, sigma, 4, 3000)
    sq_b = batch_sq_norms(rng, g, sigma, 16, 3000)
    run = running_noise_scale(sq_s, sq_b, 4, 16, beta=0.99)
    assert run.shape == (3000,)
    assert np.nanmedian(run[-1000:]) == pytest.approx(dim / (dim * 0.25), rel=0.2)  # tr/|G|² = 20/5 = 4
    mask = np.zeros(3000, dtype=bool)
    assert np.isnan(noise_scale(sq_s, sq_b, 4, 16, mask))


def test_all_noise_gives_nan_not_a_negative_scale():
    sq_s, sq_b = np.array([10.0]), np.array([1.0])  # |G|² estimate = (16 - 40)/12 < 0
    assert np.isnan(noise_scale(sq_s, sq_b, 4, 16))
    assert np.isnan(running_noise_scale(sq_s, sq_b, 4, 16, 0.9)[0])


def test_ema_is_bias_corrected_and_skips_nan():
    out = ema(np.array([np.nan, 2.0, np.nan, 4.0]), 0.5)
    assert np.isnan(out[0]) and out[1] == 2.0 and out[2] == 2.0
    assert out[3] == pytest.approx((0.25 * 2 + 0.5 * 4) / 0.75)
    with pytest.raises(ValueError):
        two_batch_estimates(np.ones(1), np.ones(1), 8, 8)


def test_typical_noise_scale_is_robust_to_the_vanishing_gradient_at_a_minimum():
    rng = np.random.default_rng(2)
    dim = 20
    sigma = np.ones(dim)
    # the true gradient shrinks along the sweep: |G|² from 5 down to ~0, noise scale from 4 to huge
    scales = np.linspace(0.5, 0.02, 2000)
    sq_s = np.array([batch_sq_norms(rng, np.full(dim, g), sigma, 4, 1)[0] for g in scales])
    sq_b = np.array([batch_sq_norms(rng, np.full(dim, g), sigma, 16, 1)[0] for g in scales])
    run = running_noise_scale(sq_s, sq_b, 4, 16, beta=0.95)
    typical = typical_noise_scale(run)
    true = dim / (dim * scales**2)  # tr(Σ)/|G|² along the sweep
    assert np.quantile(true, 0.3) < typical < np.quantile(true, 0.7)
    assert np.isnan(typical_noise_scale(run, np.zeros(2000, dtype=bool)))


def test_pooled_noise_scale_is_the_median_repeat_not_the_one_with_the_largest_gradient():
    # three repeats from different initialisations: tr(Σ) = 20 in each, |G|² = 0.5, 2 and 8, so
    # their noise scales are 40, 10 and 2.5; the pooled value is the middle one
    rng = np.random.default_rng(3)
    dim, n = 20, 1500
    sigma = np.ones(dim)
    g2s = (0.5, 2.0, 8.0)
    sq_s = np.array([batch_sq_norms(rng, np.full(dim, np.sqrt(g2 / dim)), sigma, 4, n) for g2 in g2s])
    sq_b = np.array([batch_sq_norms(rng, np.full(dim, np.sqrt(g2 / dim)), sigma, 16, n) for g2 in g2s])
    curve, value = pooled_noise_scale(sq_s, sq_b, 4, 16, 0.95)
    assert 8 < value < 12.5
    assert curve.shape == (n,) and 8 < np.nanmedian(curve[200:]) < 12.5
    # averaging the squared norms first lets the largest |G|² set the denominator: 20 / 3.5 ≈ 5.7
    mean_norms = typical_noise_scale(running_noise_scale(sq_s.mean(0), sq_b.mean(0), 4, 16, 0.95))
    assert mean_norms < 7


def test_pooled_noise_scale_ignores_padding_after_a_stop_and_honours_the_mask():
    rng = np.random.default_rng(4)
    dim, n = 20, 1000
    sigma = np.ones(dim)
    small = np.full(dim, np.sqrt(8.0 / dim))  # noise scale 2.5
    big = np.full(dim, np.sqrt(0.5 / dim))  # noise scale 40
    sq_s = np.array([batch_sq_norms(rng, small, sigma, 4, n), batch_sq_norms(rng, big, sigma, 4, n)])
    sq_b = np.array([batch_sq_norms(rng, small, sigma, 16, n), batch_sq_norms(rng, big, sigma, 16, n)])
    sq_s[1, 100:] = sq_b[1, 100:] = np.nan  # the noise-scale-40 repeat stopped after 100 points
    curve, value = pooled_noise_scale(sq_s, sq_b, 4, 16, 0.95)
    assert value < 5  # 900 points of the first repeat against 100 of the second, not 1000 each
    assert np.isnan(pooled_noise_scale(sq_s, sq_b, 4, 16, 0.95, np.zeros(n, dtype=bool))[1])
    _, early = pooled_noise_scale(sq_s, sq_b, 4, 16, 0.95, np.arange(n) < 100)
    assert 2.5 < early < 40  # both repeats count equally before the stop
