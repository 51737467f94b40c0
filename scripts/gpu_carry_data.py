"""What ``gpu_carry.py`` knows about the GPU machine and about vLLM 0.25.0's wheels, as data.

Sources: the device tool's KINDS.md ("Python packages already there", read on a machine of the
``cuda`` image 2026-11-17; versions from its ``pip list`` row) and the recipe that ran vLLM 0.25.0
there on 2026-12-01 (the shared GPU.md). Change these tables, not the code, when either moves.
"""

from __future__ import annotations

#: What the run carries: the host, the client (given to the probe as its wheel) and where.
#: speculators 0.9.0: the newest, whose served workload (``vllm serve`` + its render and
#: generate clients) is what its users run; 0.3.0/0.4.0 cannot import with the transformers 5
#: that vLLM 0.24+ needs (GPU.md), and 0.9.0 allows the machine's transformers 5.17.0 and torch.
HOST = "vllm==0.25.0"
CLIENT = "speculators==0.9.0"
#: The scan's baseline for the carried patches (speculators 0.9.0 pins no vLLM): the release
#: before the served extraction's connector existed in the form 0.9.0 uses.
BASELINE = "0.18.0"

#: Distributions installed on the GPU machine's ``python3`` (never carried).
DEVICE_NAMES = frozenset(
    """
    absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs
    botorch build certifi charset-normalizer chex click cloudpickle cmake colorama contourpy
    coverage cuda-bindings cuda-core cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython
    diffrax e3nn einops equinox etils execnet filelock flatbuffers flax fonttools formulaic
    frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize
    hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib
    jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities linear-operator
    lineax llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes
    mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals networkx
    ninja numba numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc
    nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand
    nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13
    nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript
    opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging
    pandas pathspec patsy peft pillow pip pluggy portalocker prometheus-client propcache protobuf
    psutil pyarrow pybind11 py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions pytest
    pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist python-dateutil
    pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core
    scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools
    shellingham simplejson six sortedcontainers statsmodels sympy tabulate tensorboard
    tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm tokenizers toolz
    torch torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers
    treescope triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug
    wheel wrapt xarray xxhash yarl zipp
    """.split()
)

#: The versions known of those (the rest are checked there, by ``install``).
DEVICE_VERSIONS = {
    "accelerate": "1.15.0",
    "botorch": "0.18.1",
    "cupy-cuda13x": "14.2.0",
    "gpytorch": "1.15.2",
    "huggingface-hub": "1.33.0",
    "jax": "0.11.2",
    "jaxlib": "0.11.2",
    "jaxtyping": "0.3.11",
    "numpy": "2.5.2",
    "numpyro": "0.21.0",
    "onnx": "1.23.1",
    "onnxruntime": "1.30.0",
    "pytorch-lightning": "2.6.6",
    "safetensors": "0.8.0",
    "sentence-transformers": "6.0.1",
    "sentencepiece": "0.2.2",
    "tiktoken": "0.14.0",
    "tokenizers": "0.23.2",
    "torch": "2.11.0",
    "torchaudio": "2.11.0",
    "torchmetrics": "1.9.0",
    "torchvision": "0.26.0",
    "transformers": "5.17.0",
    "triton": "3.6.0",
}

#: Versions chosen by hand where the newest that a requirement allows conflicts with the rest.
HAND_PINS = {
    "xgrammar": (
        "==0.2.3",
        "the newest (0.2.9) needs apache-tvm-ffi>=0.1.11, and vLLM 0.25.0 pins apache-tvm-ffi==0.1.9; "
        "with that pair 'import vllm' fails: load_lib_module() got an unexpected keyword "
        "argument 'extra_lib_paths'",
    ),
    "quack-kernels": (
        "==0.3.3",
        "the newest (0.6.5 on 2026-12-01) needs nvidia-cutlass-dsl>=4.7, and vLLM 0.25.0 pins "
        "nvidia-cutlass-dsl[cu13]==4.5.2 (it asks quack-kernels>=0.3.3)",
    ),
    "nvidia-cudnn-frontend": (
        "==1.19.1",
        "the newest (1.32.0 on 2026-12-01) needs nvidia-cutlass-dsl[cu13]>=4.8.0 and "
        "apache-tvm-ffi>=0.1.11, and vLLM 0.25.0 pins 4.5.2 and 0.1.9 (it asks >=1.19.1)",
    ),
}

#: Requirements not carried, although something asks for them.
LEAVE_OUT = {
    "flashinfer-cubin": "437 MiB of prebuilt FlashInfer kernels: the run uses the FLASH_ATTN "
    "backend and VLLM_USE_FLASHINFER_SAMPLER=0",
    "pynvvideocodec": "video decoding: the probe feeds text only",
    "torchcodec": "video and audio decoding: the probe feeds text only",
    "deepspeed": "speculators' training backend: published as an sdist only (it builds against "
    "torch), and no module of speculators imports it",
}

#: Unmet requirements known not to matter: (who asks, what) -> why.
IGNORED_CONFLICTS = {
    ("mistral-common", "numpy"): "mistral_common asks numpy<2.4 and the machine has 2.5.2: it "
    "did not matter in the run that worked (GPU.md)",
    ("vllm", "numba"): "vLLM pins numba==0.65.0 (used by n-gram speculative decoding only), which "
    "needs numpy<2.5; the machine has numpy 2.5.2, so its own numba is another release, and the "
    "run that worked used it (nothing of numba was carried)",
}

#: The environment of the run there: variable -> (value, why). ``{dest}`` is the carry folder.
RUN_ENV = {
    "PYTHONPATH": ("{dest}/site", "the carried packages, for a plain python3"),
    "PATH": ("{dest}/site/bin:$PATH", "the driftcheck command"),
    "OMP_NUM_THREADS": (
        "1",
        "vLLM forks its engine core; after the parent ran torch on the CPU (building the tiny "
        "model) the child hung in its first large CPU tensor op",
    ),
    "VLLM_HOST_IP": ("127.0.0.1", "one machine, no network"),
    "HF_HUB_OFFLINE": ("1", "nothing can be fetched there"),
    "TRANSFORMERS_OFFLINE": ("1", "nothing can be fetched there"),
    "VLLM_USE_V2_MODEL_RUNNER": ("0", "set in the run that worked; V2 is untried there"),
    "VLLM_USE_FLASHINFER_SAMPLER": (
        "0",
        "set in the run that worked; flashinfer-cubin is left out",
    ),
    "PYTHONFAULTHANDLER": ("1", "a hung process prints its stacks on SIGABRT"),
    "PYTHONUNBUFFERED": ("1", "the call's output tail shows progress as it happens"),
}
