#!/bin/bash
set -euo pipefail
# FIXME(demo): filled in by the training issues
exit 0
