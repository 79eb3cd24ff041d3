# fidelity-calibration.bash: the fidelity sweep's calibration (sourced by scripts/fidelity-sweep, which sets
# BIN, REUSE, ITERS, WARMUP, OVERRIDES, EXEC_FLAGS, COMPUTE_FIT, CALIBRATE_SYNC, SYNC_FIT, SP_FIT, SP_CALIBRATION,
# CALIBRATE_OVERLAP and OVERLAP_FIT, OVERLAP_PLAN (may be empty), and the caller's config and link_args).
# A profile is fitted to the calibration plans' traces: what --compute-fit names, by default the compute
# figures and the compute stream's stall, on no-comm, then (--calibrate-sync) what --sync-fit names, by
# default the ranks' arrival skew, on megatron-sync, then what --sp-fit names, by default the AllGathers' and
# ReduceScatters' transfers, on megatron-sp-sync, then (--calibrate-overlap) what --overlap-fit names, by
# default the collectives' delay beside compute, on OVERLAP_PLAN. Before the scored launch those traces come
# from a calibration launch of their own (the tuner needs a profile to pick with); with --refit-in-launch the
# profile is fitted again on the scored launch's own runs of those plans, which ran beside the plans it
# predicts.

# The overlapped calibration plan (--overlap-plan, else this one, sliced the same way on every model): its
# column chunks make collectives half the size of an unchunked plan's, so that the delay fitted on them holds
# for the smaller collectives the column-chunked plans run (docs/fidelity.md, "Column chunks' collectives").
# It leaves the sweep's scored plans.
: "${OVERLAP_PLAN:=slices:2x2:batch}"

# The plans a profile is fitted on, in the order they are fitted.
calibration_plans() {
  echo no-comm
  [[ $CALIBRATE_SYNC == 0 ]] || echo megatron-sync
  [[ ${SP_CALIBRATION:-0} == 0 ]] || echo megatron-sp-sync
  [[ $CALIBRATE_OVERLAP == 0 ]] || echo "$OVERLAP_PLAN"
}

# Sets SP_CALIBRATION=1 when the model runs sequence parallelism (megatron-sp-sync predicts), else says why
# its collectives are not calibrated. Uses OVERRIDES.
sp_calibration_applies() {  # model_arg profile dir
  if "$BIN/domino-sim" "$1" "${OVERRIDES[@]}" --strategy megatron-sp-sync --profile "$2" > "$3/logs/sp-check.log" 2>&1
  then SP_CALIBRATION=1
  else echo "  megatron-sp-sync: not calibrated on: $(tail -1 "$3/logs/sp-check.log")"; fi
}

# One fit: domino-profile --calibrate TRACE --profile IN --fit PARTS -o OUT, its report in LOG; on failure
# says that calibrating WHAT failed, with the report's last line.
fit_step() {  # trace in parts out log what
  "$BIN/domino-profile" --calibrate "$1" --profile "$2" --fit "$3" -o "$4" > "$5" 2>&1 && return 0
  echo "fidelity-sweep: $config: calibrating $6 failed: $(tail -1 "$5")"
  return 1
}

# Fits PROFILE to the calibration plans' traces in TRACES (<plan file name>.trace.json) into OUT/profile.yaml,
# one step per calibration plan, each from the one before (OUT/compute.yaml, sync.yaml, sp.yaml between them);
# the fits' reports go to LOGS/<prefix>.profile.log, .sync.log, .sp.log and .overlap.log.
fit_profile() {  # traces profile out logs prefix
  local traces="$1" in="$2" out="$3" logs="$4" prefix="$5" plans i
  mkdir -p "$out"
  mapfile -t plans < <(calibration_plans)
  for ((i = 0; i < ${#plans[@]}; i++)); do
    local step parts what
    case "${plans[i]}" in
      no-comm) step=compute parts="$COMPUTE_FIT" what="$(basename "$in")" ;;
      megatron-sync) step=sync parts="$SYNC_FIT" what="the arrival skew" ;;
      megatron-sp-sync) step=sp parts="$SP_FIT" what="the sequence-parallel collectives' transfers" ;;
      *) step=overlap parts="$OVERLAP_FIT" what="the collectives' delay" ;;
    esac
    local result="$out/$step.yaml"
    ((i + 1 < ${#plans[@]})) || result="$out/profile.yaml"
    fit_step "$traces/$(file_name "${plans[i]}").trace.json" "$in" "$parts" "$result" \
      "$logs/$prefix.$([[ $step == compute ]] && echo profile || echo "$step").log" "$what" || return 1
    in="$result"
  done
}

# --calibrate: the calibration plans' traces of this configuration, executed now in one interleaved launch
# or taken from the --reuse folder, and the profile fitted to them in DIR/calib/profile.yaml.
calibrate_profile() {  # config model_arg profile dir
  local config="$1" model_arg="$2" profile="$3" dir="$4" plan from f
  mkdir -p "$dir/calib"
  local missing=()
  for plan in $(calibration_plans); do
    f="$(file_name "$plan")"
    for from in "$REUSE/$config/calib/$f.trace.json" "$REUSE/$config/meas/$f.trace.json"; do
      if [[ -n "$REUSE" && -f "$from" ]]; then
        cp "$from" "$dir/calib/$f.trace.json"
        echo "  calibration: $plan trace reused from $from"
        break
      fi
    done
    [[ -f "$dir/calib/$f.trace.json" ]] || missing+=("$plan")
  done
  if [[ ${#missing[@]} -gt 0 ]]; then
    if ! "$BIN/domino-exec" "$model_arg" --plans "${missing[@]}" "${OVERRIDES[@]}" "${link_args[@]}" \
        "${EXEC_FLAGS[@]}" --iters "$ITERS" --warmup "$WARMUP" --no-nan-check --quiet --out "$dir/calib/launch" \
        > "$dir/logs/calib.exec.log" 2>&1; then
      echo "fidelity-sweep: $config: the calibration run (${missing[*]}) failed: $(tail -1 "$dir/logs/calib.exec.log")"
      return 1
    fi
    for plan in "${missing[@]}"; do
      f="$(file_name "$plan")"
      cp "$dir/calib/launch/$f.trace.json" "$dir/calib/$f.trace.json"
    done
  fi
  fit_profile "$dir/calib" "$profile" "$dir/calib" "$dir/logs" calib
}

# --refit-in-launch: the profile fitted again on the scored launch's runs of the calibration plans, into
# DIR/calib/in-launch/profile.yaml, from the same day's profile. Fails when one of them did not run.
refit_in_launch() {  # profile dir
  local profile="$1" dir="$2" plan
  for plan in $(calibration_plans); do
    [[ -f "$dir/meas/$(file_name "$plan").trace.json" ]] ||
      { echo "fidelity-sweep: $config: --refit-in-launch: the scored launch has no $plan trace"; return 1; }
  done
  fit_profile "$dir/meas" "$profile" "$dir/calib/in-launch" "$dir/logs" in-launch
}
