# The environment of a probe run on the lent H200 (source it before the run; GPU.md says why).
# vLLM forks its engine core; after the parent ran torch on the CPU the child hung in its first
# large CPU tensor op.
export OMP_NUM_THREADS=1
# One machine, no network.
export VLLM_HOST_IP=127.0.0.1
# Set in the run that worked; V2 is untried there.
export VLLM_USE_V2_MODEL_RUNNER=0
# flashinfer-cubin is not carried (--exclude).
export VLLM_USE_FLASHINFER_SAMPLER=0
# A hung process prints its stacks on SIGABRT; the call's output tail shows progress as it happens.
export PYTHONFAULTHANDLER=1 PYTHONUNBUFFERED=1
