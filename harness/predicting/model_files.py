"""Any model's shape for a prediction: GPT-2's four sizes, a file under models/ by its name, or
any JSON file of layers, width, heads and, for a Llama-style model, key/value heads, feed-forward
width and a gated feed-forward. Hugging Face's config.json names are read too.

    python two_phases.py --predict h100-sxm --model llama-3-8b
"""
import dataclasses
import difflib
import json
import os
import stat

from harness.terminal import printable, quoted
import model

MODELS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))), "models")  # the checkout's models/
FILE_MAX = 1 << 16  # a model file is a few hundred bytes: more is not one
ALIASES = {"layers": ("num_hidden_layers", "n_layer"), "width": ("hidden_size", "n_embd"),
           "heads": ("num_attention_heads", "n_head"),
           "kv_heads": ("num_key_value_heads", "num_kv_heads", "n_head_kv"),  # (Falcon's two)
           "ffn": ("intermediate_size", "n_inner"), "head": ("head_dim",),
           "context": ("max_position_embeddings", "n_positions", "n_ctx"),
           "vocab": ("vocab_size", "n_vocab"),
           "experts": ("num_local_experts", "num_experts", "n_routed_experts"),
           "active": ("num_experts_per_tok", "moe_topk")}
BOUNDS = {"layers": (1, 1000), "width": (1, 10 ** 6), "heads": (1, 10 ** 4),
          "kv_heads": (1, 10 ** 4), "ffn": (1, 10 ** 7), "head": (1, 10 ** 5),
          "context": (1, 10 ** 8), "vocab": (1, 10 ** 7), "experts": (1, 10 ** 4),
          "active": (1, 10 ** 4)}
GPT2_VOCAB = 50257  # GPT-2's words, its head tied to its embedding (Radford et al. 2019)


def config(text):
    """The model --model names: a GPT-2 size, a file under models/ by its name, or a JSON file
    with layers, width, heads and, for a Llama-style model, kv_heads, ffn, gated (Hugging Face's
    config.json names are read too). -> Config, or raise ValueError in one line."""
    if text in model.SIZES:  # predicted with its head, which the measured model does not run
        return dataclasses.replace(model.SIZES[text], vocab=GPT2_VOCAB)
    named = os.path.join(MODELS, text + ".json")
    path = named if os.path.lexists(named) else text
    if not os.path.lexists(path):
        near = difflib.get_close_matches(text.lower(), [*model.SIZES, *shipped_models()], n=1)
        if near and near[0] == text.lower() != text:
            return config(near[0])  # a name is a name in any case: Llama-3-8B is llama-3-8b
        raise ValueError(f"must be a GPT-2 size ({', '.join(model.SIZES)}), a model under "
                         f"models/ ({', '.join(shipped_models())}) or a JSON file, got "
                         f"{quoted(text, 60)}" + (f" (did you mean {near[0]}?)" if near else ""))
    shown = quoted(f"models/{text}.json" if path == named else path, 60)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO in its place does not block
    except OSError as e:
        raise ValueError(f"{shown} cannot be read ({e.strerror or e}): a model is a JSON "
                         f"file") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ValueError(f"{shown} is not a regular file (a folder, a FIFO or a device): a "
                         f"model is a JSON file")
    with os.fdopen(fd, "rb") as f:
        raw = f.read(FILE_MAX + 1)
    if not raw or len(raw) > FILE_MAX:
        raise ValueError(f"{quoted(path, 60)} is not a model file of 1 to {FILE_MAX:,} "
                         f"bytes")
    try:
        found = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise ValueError(f"{quoted(path, 60)} is not JSON (or nested too deeply)") from None
    if not isinstance(found, dict):
        raise ValueError(f"{quoted(path, 60)} must hold a JSON object, not a "
                         f"{type(found).__name__}")
    return shape(language_model(found), quoted(path, 60))


def language_model(found):
    """A model file's fields, where a multimodal Hugging Face config (Llama 4's, Gemma 3's)
    keeps its language model's in "text_config": those, with the file's own beside them (its
    name); a plain config as it is."""
    text = found.get("text_config")
    if not isinstance(text, dict) or any(k in found for k in ("layers", *ALIASES["layers"])):
        return found
    return {**{k: v for k, v in found.items() if not isinstance(v, dict)}, **text}


HUGGING_FACE = ("model_type", "architectures", "hidden_size", "num_hidden_layers")  # its names


def needed(found, fields, gated, path):
    """Refuse, in one line naming the key, a config missing what a prediction cannot guess: a
    Hugging Face config's vocabulary (its embedding and LM head, about 7% of an 8B model's step,
    which a guess of none would drop), and a gated feed-forward's width (GPT-2's 4 x width is a
    plain one's; a SwiGLU's has no default)."""
    if not fields["vocab"] and any(k in found for k in HUGGING_FACE):
        raise ValueError(f"{path}: needs 'vocab_size' (or 'vocab'): the embedding and the LM "
                         f"head a step reads are counted from it")
    if gated and not fields["ffn"] and not found.get("moe_intermediate_size"):
        raise ValueError(f"{path}: needs 'intermediate_size' (or 'ffn'): a gated "
                         f"feed-forward's width has no default (GPT-2's 4 x width is a plain "
                         f"one's)")


def shape(found, path):
    """A Config from a model file's fields, each checked."""
    fields, key = {}, {}  # key: the name the file gives each field (its own, or an alias)
    for name, (lo, hi) in BOUNDS.items():
        key[name] = next((k for k in (name, *ALIASES[name]) if found.get(k) is not None), name)
        v = found.get(key[name])
        if v is None and name in ("layers", "width", "heads"):
            raise ValueError(f"{path}: needs {name!r} (or {' or '.join(map(repr, ALIASES[name]))})")
        if v is not None and (type(v) is not int or not lo <= v <= hi):
            raise ValueError(f"{path}: {key[name]!r} must be a whole number from {lo} to "
                             f"{hi:,}, got {shown(v)}")
        fields[name] = v or 0
    if not fields["head"] and fields["heads"] > fields["width"]:
        raise ValueError(f"{path}: {key['heads']!r} ({fields['heads']}) must be at most "
                         f"{key['width']!r} ({fields['width']}), or give 'head' or "
                         f"'head_dim', the numbers per head")
    if bool(fields["experts"]) != bool(fields["active"]) or fields["active"] > fields["experts"]:
        raise ValueError(f"{path}: a mixture of experts needs {key['experts']!r} and "
                         f"{key['active']!r}, the experts each token is routed to, at most "
                         f"{key['experts']!r}; got {fields['experts'] or 'no'} experts, "
                         f"{fields['active'] or 'none'} a token")
    ffn = found.get("moe_intermediate_size") if fields["experts"] else None
    if ffn is not None:  # an expert's own width (Qwen's, DeepSeek's), not the dense layers'
        if type(ffn) is not int or not 1 <= ffn <= BOUNDS["ffn"][1]:
            raise ValueError(f"{path}: 'moe_intermediate_size' must be a whole number from 1 to "
                             f"{BOUNDS['ffn'][1]:,}")
        fields["ffn"] = ffn
    if not fields["head"] and fields["width"] % fields["heads"] and not found.get(
            "kv_lora_rank"):
        raise ValueError(f"{path}: {key['width']!r} ({fields['width']}) must divide by "
                         f"{key['heads']!r} ({fields['heads']}), or give 'head' or "
                         f"'head_dim', the numbers per head")
    refused(found, fields, path)
    if fields["kv_heads"] and fields["heads"] % fields["kv_heads"]:
        raise ValueError(f"{path}: {key['kv_heads']!r} ({fields['kv_heads']}) must divide "
                         f"{key['heads']!r} ({fields['heads']})")
    gated = found.get("gated", found.get("hidden_act") in ("silu", "swiglu")
                      or str(found.get("model_type", "")).startswith("gemma"))
    tied = found.get("tied", found.get("tie_word_embeddings", True))  # Hugging Face's default
    if type(gated) is not bool or type(tied) is not bool:
        raise ValueError(f"{path}: 'gated' and 'tied' must be true or false")
    needed(found, fields, gated, path)
    latent, floors = latent_attention(found, fields, path), mixture_floors(found, fields, path)
    name = next((n for n in (found.get("name"), found.get("_name_or_path"))
                 if isinstance(n, str) and n.strip()), os.path.basename(path.strip("'\"")))
    gpt2 = model.gpt2("", fields["layers"], fields["width"], fields["heads"])
    shaped = {"kv_heads": fields["kv_heads"] or (1 if one_note_head(found, path) else
                                                 gpt2.kv_heads), "ffn": fields["ffn"] or gpt2.ffn,
              "head": fields["head"] or gpt2.head, **latent, **floors}
    return model.Config(printable(name)[:60], fields["layers"], fields["width"], fields["heads"],
                        gated=gated, context=fields["context"] or model.CONTEXT, family="",
                        vocab=fields["vocab"], tied=tied, experts=fields["experts"],
                        active=fields["active"], **shaped)


def count(found, key, path, lo=0, hi=10 ** 6):
    """A config's whole number under `key` (None where absent), or raise ValueError naming it."""
    v = found.get(key)
    if v is not None and (type(v) is not int or not lo <= v <= hi):
        raise ValueError(f"{path}: {key!r} must be a whole number from {lo} to {hi:,}, got "
                         f"{shown(v)}")
    return v


def shown(v):
    """A config's value as its file writes it: '"129280"' for text, so that it reads as text."""
    try:
        return json.dumps(v)[:40]
    except (TypeError, ValueError):
        return repr(v)[:40]


def latent_attention(found, fields, path):
    """A config's latent attention (DeepSeek's MLA: kv_lora_rank and its kin) as Config's
    fields: {} for a model without."""
    if found.get("kv_lora_rank") is None:
        return {}
    said = {k: count(found, k, path, 1) for k in ("kv_lora_rank", "qk_rope_head_dim",
                                                  "qk_nope_head_dim", "v_head_dim")}
    missing = [k for k, v in said.items() if v is None]
    if missing:
        raise ValueError(f"{path}: latent attention ('kv_lora_rank') needs {missing[0]!r}")
    return {"latent": said["kv_lora_rank"], "rope": said["qk_rope_head_dim"],
            "q_latent": count(found, "q_lora_rank", path, 1) or 0,
            "v_head": said["v_head_dim"], "head": said["qk_nope_head_dim"]
            + said["qk_rope_head_dim"], "kv_heads": fields["heads"]}


def mixture_floors(found, fields, path):
    """A mixture's floors that are not: the dense ones (DeepSeek's first_k_dense_replace and
    moe_layer_freq, Qwen's mlp_only_layers and decoder_sparse_step) with their feed-forward's
    width (intermediate_size beside moe_intermediate_size), and its shared experts' width
    (n_shared_experts x moe_intermediate_size, or shared_expert_intermediate_size)."""
    if not fields["experts"]:
        return {}
    layers = fields["layers"]
    first = count(found, "first_k_dense_replace", path, 0, layers) or 0
    freq = count(found, "moe_layer_freq", path, 1, layers) or 1
    step = count(found, "decoder_sparse_step", path, 1, layers) or 1
    only = found.get("mlp_only_layers") or []
    if not isinstance(only, list) or not all(type(i) is int and 0 <= i < layers for i in only):
        raise ValueError(f"{path}: 'mlp_only_layers' must list floors from 0 to {layers - 1}")
    mixed = [i for i in range(layers) if i >= first and i % freq == 0
             and (i + 1) % step == 0 and i not in only]
    shared = (count(found, "shared_expert_intermediate_size", path, 1)
              or (count(found, "n_shared_experts", path, 0, 64) or 0) * fields["ffn"])
    dense = layers - len(mixed)
    wide = count(found, "intermediate_size", path, 1)
    if dense and not mixed:
        raise ValueError(f"{path}: 'first_k_dense_replace', 'moe_layer_freq', "
                         f"'decoder_sparse_step' and 'mlp_only_layers' leave none of its "
                         f"{layers} floors with experts (first_k_dense_replace at most "
                         f"{layers - 1})")
    return {"shared": shared, "dense": dense, "dense_ffn": (wide or fields["ffn"]) if dense
            else 0}


REFUSED = {  # keys a config may hold that change what a step reads, not modelled here
    "interleave_moe_layer_step": "experts on every Nth floor, their dense floors of another "
                                 "width (Llama 4's intermediate_size_mlp)",
    "attention_chunk_size": "attention within chunks of the notes (Llama 4's)",
    "sliding_window_pattern": "floors that keep only the latest notes (Gemma's pattern)"}


def one_note_head(found, path):
    """Whether the config says every query head shares one key/value head (multi-query
    attention: GPT-BigCode's and Falcon-7B's "multi_query": true), where it gives no count of
    them; raise ValueError where it says something else than true or false."""
    said = found.get("multi_query", False)
    if type(said) is not bool:
        raise ValueError(f"{path}: 'multi_query' must be true or false, got {shown(said)}")
    return said


def refused(found, fields, path):
    """Raise ValueError, naming the key, where a config says something its prediction would get
    wrong: floors whose notes slide (sliding_window within the context, layer_types other than
    full attention), or any of REFUSED. A window the model never reaches, or one switched off
    (use_sliding_window false), changes nothing."""
    for key, what in REFUSED.items():
        if found.get(key) not in (None, 1) and (key != "sliding_window_pattern"
                                                or found.get("sliding_window")):
            raise ValueError(f"{path}: {key!r}: {what} is not modelled; a prediction would "
                             f"count every floor alike")
    kinds = found.get("layer_types")
    if kinds is not None and (not isinstance(kinds, list) or len(kinds) != fields["layers"]):
        raise ValueError(f"{path}: 'layer_types' must list each of the {fields['layers']} "
                         f"floors' attention, got {shown(kinds)}")
    if kinds and any(k != "full_attention" for k in kinds):
        other = next(k for k in kinds if k != "full_attention")
        raise ValueError(f"{path}: 'layer_types' holds {shown(other)} floors: only full "
                         f"attention is modelled (a sliding floor keeps fewer notes)")
    if "model_type" in found and not fields["context"]:  # a Hugging Face config that names
        raise ValueError(f"{path}: no context length: give 'context' (or "  # none (Falcon's)
                         f"{' or '.join(map(repr, ALIASES['context']))}), the longest notebook "
                         f"a user keeps")
    window = found.get("sliding_window")
    context = fields["context"] or model.CONTEXT
    if window is not None and (type(window) is not int or window < 1):
        raise ValueError(f"{path}: 'sliding_window' must be a whole number of tokens, or "
                         f"null, got {shown(window)}")
    if window is not None and found.get("use_sliding_window", True) is not False and \
            window < context:
        raise ValueError(f"{path}: 'sliding_window' ({str(window)[:20]}) is shorter than the "
                         f"context ({context:,}): floors that keep only the latest notes are "
                         f"not modelled (a prediction would count every note)")


def shipped_models():
    """The models under models/ by name: its regular JSON files (not a folder, a FIFO or a link
    to nothing named so)."""
    return sorted(n[:-5] for n in os.listdir(MODELS)
                  if n.endswith(".json") and os.path.isfile(os.path.join(MODELS, n)))
