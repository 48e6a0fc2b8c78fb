#!/usr/bin/env bash
echo "setup: crds: TODO" >&2
