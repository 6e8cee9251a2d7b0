#!/usr/bin/env bash
# Run every benchmark in bench/ (not part of the test suite). Each prints ratios against
# the raw libraries measured in the same run; see docs/benchmarks.md.
set -uo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 ANONYMIZED_TELEMETRY=False DJANGO_SETTINGS_MODULE=${DJANGO_SETTINGS_MODULE:-tests.settings}
status=0
for script in bench/*.py; do
  case "$(basename "$script")" in
    _*) continue ;;
    # Need a real model (run by hand, see README) or are not benchmarks themselves.
    llm_recorder.py|living_quality.py|demo_living_record.py|demo_chapters_record.py|e2e_narrator.py|proxy_e2e.py) continue ;;
    console_try.py|ttft.py|knowledge_llm.py) continue ;;
  esac
  echo "=== $script ==="
  .venv/bin/python "$script" || status=1
done
exit $status
