# fidelity-calibration.bash: the fidelity sweep's calibration (sourced by scripts/fidelity-sweep, which sets
# BIN, REUSE, ITERS, WARMUP, OVERRIDES, EXEC_FLAGS, CALIBRATE_SYNC and SYNC_FIT, and the caller's config and
# link_args).
# A profile is fitted to the calibration plans' traces: compute figures on no-comm, then (--calibrate-sync)
# what --sync-fit names, by default the ranks' arrival skew, on megatron-sync. Before the scored launch those
# traces come from a calibration launch of their own (the tuner needs a profile to pick with); with
# --refit-in-launch the profile is fitted again on the scored launch's own runs of those plans, which ran
# beside the plans it predicts.

# The plans a profile is fitted on, in the order they are fitted.
calibration_plans() {
  echo no-comm
  [[ $CALIBRATE_SYNC == 0 ]] || echo megatron-sync
}

# Fits PROFILE to the calibration plans' traces in TRACES (<plan>.trace.json) into OUT/profile.yaml (with
# --calibrate-sync via OUT/compute.yaml); the fits' reports go to LOGS/<prefix>.profile.log and .sync.log.
fit_profile() {  # traces profile out logs prefix
  local traces="$1" profile="$2" out="$3" logs="$4" prefix="$5"
  mkdir -p "$out"
  local fitted="$out/profile.yaml"
  [[ $CALIBRATE_SYNC == 0 ]] || fitted="$out/compute.yaml"
  if ! "$BIN/domino-profile" --calibrate "$traces/no-comm.trace.json" --profile "$profile" \
      --fit gemm,memory,attention -o "$fitted" > "$logs/$prefix.profile.log" 2>&1; then
    echo "fidelity-sweep: $config: calibrating $(basename "$profile") failed: $(tail -1 "$logs/$prefix.profile.log")"
    return 1
  fi
  if [[ $CALIBRATE_SYNC == 1 ]] && ! "$BIN/domino-profile" --calibrate "$traces/megatron-sync.trace.json" \
      --profile "$fitted" --fit "$SYNC_FIT" -o "$out/profile.yaml" > "$logs/$prefix.sync.log" 2>&1; then
    echo "fidelity-sweep: $config: calibrating the arrival skew failed: $(tail -1 "$logs/$prefix.sync.log")"
    return 1
  fi
}

# --calibrate: the calibration plans' traces of this configuration, executed now in one interleaved launch
# or taken from the --reuse folder, and the profile fitted to them in DIR/calib/profile.yaml.
calibrate_profile() {  # config model_arg profile dir
  local config="$1" model_arg="$2" profile="$3" dir="$4" plan from
  mkdir -p "$dir/calib"
  local missing=()
  for plan in $(calibration_plans); do
    for from in "$REUSE/$config/calib/$plan.trace.json" "$REUSE/$config/meas/$plan.trace.json"; do
      if [[ -n "$REUSE" && -f "$from" ]]; then
        cp "$from" "$dir/calib/$plan.trace.json"
        echo "  calibration: $plan trace reused from $from"
        break
      fi
    done
    [[ -f "$dir/calib/$plan.trace.json" ]] || missing+=("$plan")
  done
  if [[ ${#missing[@]} -gt 0 ]]; then
    if ! "$BIN/domino-exec" "$model_arg" --plans "${missing[@]}" "${OVERRIDES[@]}" "${link_args[@]}" \
        "${EXEC_FLAGS[@]}" --iters "$ITERS" --warmup "$WARMUP" --no-nan-check --quiet --out "$dir/calib/launch" \
        > "$dir/logs/calib.exec.log" 2>&1; then
      echo "fidelity-sweep: $config: the calibration run (${missing[*]}) failed: $(tail -1 "$dir/logs/calib.exec.log")"
      return 1
    fi
    for plan in "${missing[@]}"; do cp "$dir/calib/launch/$plan.trace.json" "$dir/calib/$plan.trace.json"; done
  fi
  fit_profile "$dir/calib" "$profile" "$dir/calib" "$dir/logs" calib
}

# --refit-in-launch: the profile fitted again on the scored launch's runs of the calibration plans, into
# DIR/calib/in-launch/profile.yaml, from the same day's profile. Fails when one of them did not run.
refit_in_launch() {  # profile dir
  local profile="$1" dir="$2" plan
  for plan in $(calibration_plans); do
    [[ -f "$dir/meas/$plan.trace.json" ]] ||
      { echo "fidelity-sweep: $config: --refit-in-launch: the scored launch has no $plan trace"; return 1; }
  done
  fit_profile "$dir/meas" "$profile" "$dir/calib/in-launch" "$dir/logs" in-launch
}
