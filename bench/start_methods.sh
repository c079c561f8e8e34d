#!/usr/bin/env bash
# Side by side on the peer harness's digits job (../shared/peers, one train() call, 2 trials, 2 cores):
# ignite-simple 0.0.11, then ignite_seg with its workers from the fork server, then forked from the
# caller (the default where safe since session 9; the variable unset), interleaved per pair and repeat, so that the
# machine's load moves all three alike. Prints one line per run and the ratios per pair.
# usage: bench/start_methods.sh SEG_PYTHON [REPS] [PEERS_DIR]   (SEG_PYTHON: a python that imports this ignite_seg)
# METHODS="default" runs only the default start method. SEED_BY_REP=1 gives ignite_seg the seed REP-1 in
# repeat REP (ignite-simple is unseeded: each of its runs is a draw; with a fixed seed ours is one draw
# repeated), so the val accuracies of a run compare draw against draw. Each of ours also prints the wall seconds
# of its tune's length check (session 14: what the ratio would be without it is peer / (ours - length)).
set -euo pipefail
PY=${1:?python that imports this ignite_seg}; REPS=${2:-1}; PEERS=${3:-/work/shared/peers}
OUT=${OUT:-/tmp/start_methods}; mkdir -p "$OUT"
for rep in $(seq "$REPS"); do
  for pair in "fastest images-min" "fast none"; do
    set -- $pair
    load=$(cut -d" " -f1 /proc/loadavg)
    peer=$(bash "$PEERS/ignite_simple/run.sh" "$1" "$2" | tail -1)
    line="rep $rep $1 $2 load $load | peer $(python3 -c 'import json,sys; p=json.loads(sys.argv[1]); print(p["wall_s"], p["val_perf_mean"])' "$peer")"
    seed=0; if [ "${SEED_BY_REP:-0}" = 1 ]; then seed=$((rep - 1)); fi
    line="$line | seed $seed"
    for method in ${METHODS:-forkserver default}; do  # default: the variable unset (this job: forked from the caller)
      rm -rf "$OUT/run-$method"
      if [ "$method" = default ]; then unset IGNITE_SEG_START_METHOD; else export IGNITE_SEG_START_METHOD=$method; fi
      /usr/bin/time -f '%e' -o "$OUT/time" env PYTHONPATH="$PEERS/ignite_seg" \
          MPLBACKEND=Agg "$PY" "$PEERS/ignite_seg/digits.py" "$1" "$2" --seed "$seed" --folder "$OUT/run-$method/current" \
          > "$OUT/out-$method.json" 2> "$OUT/log-$method-$rep-$1.txt"
      line="$line | $method $(tail -1 "$OUT/time") $(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])["val_perf_mean"])' "$OUT/out-$method.json")"
      # the tune's length check (session 14), wall seconds, from misc.json ("-" where it did not run)
      line="$line length $(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["compute"]["wall_seconds"].get("length", 0.0), 2))' "$OUT/run-$method/current/hparams/misc.json" 2>/dev/null || echo -)"
    done
    echo "$line"
  done
done
