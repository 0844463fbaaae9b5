#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# datapath-model's SIGKILL variant: children run the model with a durable
# index and are killed at random moments; each round restores every file
# from the index through a fresh bdi and checks every byte
# (tests/datapath-model.c, "The SIGKILL variant"). PWB_MODEL_CRASH_ROUNDS
# sets the rounds (default 4), PWB_MODEL_SEED repeats a run.
exec "${top_builddir:-.}/tests/datapath-model" --crash "${PWB_MODEL_CRASH_ROUNDS:-4}"
