"""A model's shape (Config: GPT-2's sizes, and the Llama-style, mixture-of-experts and split
models Part 4 predicts) and the accounting of one trip: the numbers its tables hold, the bytes
it must fetch and the FLOPs it must do, part by part, and the limit a machine's forklift and
workbench put on it. It needs nothing but Python; model.py runs what this counts.

    python -c "import accounting as a; print(a.table_numbers(a.SIZES['small']), a.NOTE_BYTES)"
"""
import dataclasses
import math

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "fp8": 1, "int8": 1,
               "int8-weights": 1, "int4-weights": 0.5}
#   bytes per number: what a table number or a note weighs, by its precision. int8 is 8-bit
#   math on 8-bit activations; int8-weights and int4-weights keep only the tables that small,
#   the math at 16 bits (as most engines run a quantized model); fp8 is e4m3
GROUP, SCALE_BYTES = 128, 2  # a weights-only table keeps a 16-bit scale for every 128 numbers
#   (GPTQ's and AWQ's usual groups): int4-weights weigh 0.5 + 2/128 bytes a number, not 0.5
HEAD_DTYPE = "bfloat16"  # what engines keep the LM head and the embedding in when the floors'
#   tables are 8 or 4 bits: 16 bits (--quantize-head keeps them at the tables' precision)
NOTE_DTYPES = ("float32", "bfloat16", "float16", "fp8", "int8")  # what a note can be kept in
RUNS_IN = ("float32", "bfloat16", "float16")  # what the model computes in: float32 (NumPy's, the
#   post's), or 16 bits on PyTorch's or CuPy's device (two_phases.py --dtype)
CONTEXT = 1024  # GPT-2's n_ctx: the longest question, or notebook of a typer, the flags accept


@dataclasses.dataclass(frozen=True)
class Config:
    """A model's shape, passed to everything that depends on it, and the precision its numbers
    are kept in. GPT-2 is gpt2(name, layers, width, heads); a Llama-style model (predicted only)
    says the rest: fewer key/value heads than query heads (grouped-query attention), a
    feed-forward width of its own, and a gated feed-forward (SwiGLU: a gate table beside up)."""
    name: str
    layers: int  # floors
    width: int  # numbers per token on the residual stream
    heads: int  # query heads, each `head` numbers wide
    kv_heads: int  # key/value heads, whose notes each user keeps (GPT-2: as many as heads)
    ffn: int  # the feed-forward's width (GPT-2: 4 x width)
    head: int  # numbers per head (64 in every GPT-2)
    gated: bool = False  # a gate table beside up, multiplied into it (SwiGLU)
    context: int = CONTEXT  # the longest notebook the model was trained for
    dtype: str = "float32"  # a table number's precision; the model runs in RUNS_IN
    note_dtype: str = "float32"  # a note's
    family: str = "GPT-2"
    vocab: int = 0  # the LM head's rows, and the embedding's; 0: neither counted (the post's)
    tied: bool = True  # the embedding is the head's own table (GPT-2's), not a second one
    experts: int = 0  # a mixture of experts: feed-forwards per floor (0: one, a dense model)
    active: int = 0  # the experts each token is routed to, of `experts`
    shared: int = 0  # a mixture's shared experts: the width every token meets beside its own
    dense: int = 0  # a mixture's floors with one dense feed-forward instead (DeepSeek's first)
    dense_ffn: int = 0  # their feed-forward's width
    latent: int = 0  # latent attention (DeepSeek's MLA): a note is one compressed vector of
    #                  `latent` numbers and `rope` more per floor, shared by every head
    rope: int = 0  # the rotary part of a query and a key head, within `head`
    q_latent: int = 0  # the queries' compression, where they have one
    v_head: int = 0  # a value head's width under latent attention (`head` is a query's)
    devices: int = 1  # tensor parallel: each device holds 1/devices of every table and note
    head_dtype: str = ""  # the LM head's and the embedding's precision ("": the tables')
    act_dtype: str = ""  # the activations', which the math runs at ("": as the tables say)

    @property
    def runnable(self):
        """Whether this file can run it, not only count it: GPT-2's block, in float32 (or, on a
        GPU library's device, a 16-bit precision, tables and notes alike)."""
        return self.dtype in RUNS_IN and self == dataclasses.replace(
            gpt2(self.name, self.layers, self.width, self.heads), context=self.context,
            family=self.family, dtype=self.dtype, note_dtype=self.dtype)

    def __str__(self):
        shape = [f"{self.layers} floors", f"width {self.width}"]
        if self.kv_heads != self.heads:
            shape.append(f"{self.kv_heads} key/value heads for {self.heads} query heads")
        if self.latent:
            shape.append(f"latent notes of {self.latent} + {self.rope}")
        if self.experts:
            shape.append(f"{self.active} of {self.experts} experts a token"
                         + (" and a shared one" if self.shared else "")
                         + (f", the first {self.dense} floors dense" if self.dense else ""))
        if self.dtype != "float32" or self.note_dtype != "float32":
            shape.append(self.dtype if self.dtype == self.note_dtype
                         else f"{self.dtype} tables, {self.note_dtype} notes")
        if self.vocab:
            shape.append(f"a vocabulary of {self.vocab:,} tokens" + (
                f" in {self.head_dtype}" if self.head_dtype not in ("", self.dtype) else ""))
        if self.devices > 1:
            shape.append(f"split over {self.devices} devices")
        return f"{self.family} {self.name}".strip() + f" ({', '.join(shape)})"


def gpt2(name, layers, width, heads):
    """GPT-2's shape: every head 64 numbers wide in the real sizes, a feed-forward of 4 x width."""
    return Config(name, layers, width, heads, kv_heads=heads, ffn=4 * width, head=width // heads)


SIZES = {c.name: c for c in (gpt2("small", 12, 768, 12), gpt2("medium", 24, 1024, 16),
                             gpt2("large", 36, 1280, 20), gpt2("xl", 48, 1600, 25))}
#        GPT-2's four sizes (Radford et al. 2019)
TINY = gpt2("tiny", 2, 64, 4)  # the same math at a size tests run in milliseconds
BYTES = DTYPE_BYTES["float32"]  # the model runs in float32
FLOPS_PER_NUMBER = 2  # a table number meets a token once: one multiply, one add


# ---------------------------------------------------------------------------------------------
# accounting: what a trip must fetch and compute. riders: [(notes before, new tokens)] per user.


def attention_numbers(cfg):
    """One floor's attention tables: the queries' (width, heads x head), the keys' and values'
    (width, kv_heads x head) each, and out (heads x head, width). Latent attention: the
    queries' (through their compression, where they have one), the notes' compression (width,
    latent + rope), its expansion to every head's key and value (latent, heads x (head - rope +
    v_head)) and out (heads x v_head, width)."""
    if not cfg.latent:
        return cfg.width * cfg.head * (2 * cfg.heads + 2 * cfg.kv_heads)
    queries = (cfg.width * cfg.q_latent + cfg.q_latent * cfg.heads * cfg.head if cfg.q_latent
               else cfg.width * cfg.heads * cfg.head)
    notes = (cfg.width * (cfg.latent + cfg.rope)
             + cfg.latent * cfg.heads * (cfg.head - cfg.rope + cfg.v_head))
    return queries + notes + cfg.heads * cfg.v_head * cfg.width


def ffn_numbers(cfg):
    """One feed-forward's tables (one expert's, in a mixture): up and down (width, ffn) each,
    and the gate's where there is one."""
    return (3 if cfg.gated else 2) * cfg.width * cfg.ffn


def routed(cfg):
    """The floors whose feed-forward is cfg.ffn wide (a mixture's: its experts, and its shared
    ones), all but the dense ones."""
    return cfg.layers - cfg.dense


def fixed_numbers(cfg):
    """A mixture's numbers every token meets whatever its experts, over all floors: the
    shared experts' and the dense floors' feed-forwards."""
    per = (3 if cfg.gated else 2) * cfg.width
    return routed(cfg) * per * cfg.shared + cfg.dense * per * cfg.dense_ffn


def table_numbers(cfg):
    """Numbers in the floors' tables, every expert's and the router's among them. GPT-2:
    (3 w*w + w*w + 4 w*w + 4 w*w) per floor."""
    return (cfg.layers * attention_numbers(cfg) + fixed_numbers(cfg) + routed(cfg) * (
        max(cfg.experts, 1) * ffn_numbers(cfg) + cfg.width * cfg.experts))
    #       84,934,656 for GPT-2 small


def head_numbers(cfg):
    """The LM head's (vocab, width) and, untied, the token embedding's own (vocab, width)."""
    return cfg.vocab * cfg.width * (1 if cfg.tied else 2)


def parameters(cfg):
    """(every parameter, those one token meets): the floors' tables and the embedding and head
    (LayerNorm's few scales aside); a mixture's token meets its active experts and the shared."""
    active = (cfg.layers * attention_numbers(cfg) + fixed_numbers(cfg) + routed(cfg) * (
        max(cfg.active, 1) * ffn_numbers(cfg) + cfg.width * cfg.experts))
    return table_numbers(cfg) + head_numbers(cfg), active + head_numbers(cfg)


def number_bytes(dtype):
    """What a table number weighs at its precision, a weights-only one's share of its group's
    scale among it (int4-weights: 0.515625 bytes)."""
    scales = SCALE_BYTES / GROUP if dtype in ("int8-weights", "int4-weights") else 0
    return DTYPE_BYTES[dtype] + scales


def head_dtype(cfg):
    """The precision the LM head and the embedding are kept in: cfg.head_dtype, else the
    tables'."""
    return cfg.head_dtype or cfg.dtype


def table_bytes(cfg):
    """What the floors' tables weigh at their precision: 340 MB for GPT-2 small in float32."""
    return table_numbers(cfg) * number_bytes(cfg.dtype)


def held_bytes(cfg):
    """What one device holds of every table, the head and the embedding among them."""
    return (table_numbers(cfg) * number_bytes(cfg.dtype)
            + head_numbers(cfg) * number_bytes(head_dtype(cfg))) / cfg.devices


def note_bytes(cfg):
    """One token's notes: a key and a value per key/value head on every floor, at the notes'
    precision (72 KB for GPT-2 small in float32); under latent attention, its compressed
    vector and rotary key on every floor."""
    numbers = cfg.latent + cfg.rope if cfg.latent else 2 * cfg.kv_heads * cfg.head
    return cfg.layers * numbers * DTYPE_BYTES[cfg.note_dtype]


NOTE_BYTES = note_bytes(SIZES["small"])  # 73,728: the post's 72 KB a note


def notes_share(cfg):
    """The share of every note one device keeps: split by key/value heads, a head per device at
    least (with more devices than heads, a head's notes are kept on each that needs them);
    latent notes, which every head reads, whole on each device."""
    if cfg.latent:
        return 1
    return -(-cfg.kv_heads // cfg.devices) / cfg.kv_heads


def experts_read(cfg, tokens):
    """The feed-forwards a trip of `tokens` tokens reads per floor: one in a dense model; in a
    mixture, the experts at least one token is routed to, expected with routing at random:
    experts x (1 - (1 - active/experts)^tokens), every expert once enough tokens ride."""
    if not cfg.experts:
        return 1
    return cfg.experts * (1 - (1 - cfg.active / cfg.experts) ** tokens)


def tables_read(cfg, tokens):
    """Bytes of the floors' tables a trip of `tokens` tokens brings, on one device."""
    numbers = (cfg.layers * attention_numbers(cfg) + fixed_numbers(cfg) + routed(cfg) * (
        cfg.width * cfg.experts + experts_read(cfg, tokens) * ffn_numbers(cfg)))
    return numbers * number_bytes(cfg.dtype) / cfg.devices


def table_flops(cfg, tokens):
    """Each table number meets each token once, one multiply and one add: every token meets the
    attention tables, the router's and its own experts' feed-forwards."""
    per_token = (cfg.layers * attention_numbers(cfg) + fixed_numbers(cfg) + routed(cfg) * (
        cfg.width * cfg.experts + max(cfg.active, 1) * ffn_numbers(cfg)))
    return FLOPS_PER_NUMBER * per_token * tokens / cfg.devices


NORM_FLOPS, GELU_FLOPS, ADD_FLOPS = 5, 9, 1  # per number: a norm's mean, subtract, square,
#    sum, divide; GELU's three products for the cube and its scale, add, scale, tanh, add one,
#    halve, product; the residual add


def elementwise_flops(cfg, tokens):
    """Two norms and two adds over the width, the activation over each routed feed-forward
    (and, gated, its product with the gate), split over the devices."""
    widths = (routed(cfg) * (cfg.ffn * max(cfg.active, 1) + cfg.shared)
              + cfg.dense * cfg.dense_ffn)  # every floor's feed-forward a token crosses
    per_token = (cfg.layers * (2 * NORM_FLOPS + 2 * ADD_FLOPS) * cfg.width
                 + (GELU_FLOPS + cfg.gated) * widths)
    return per_token * tokens / cfg.devices


def attended_pairs(riders):
    """(new token, note) pairs that causality allows: token i of a rider reads n0 + i + 1."""
    return sum(t * n0 + t * (t + 1) // 2 for n0, t in riders)


@dataclasses.dataclass(frozen=True)
class Load:
    """All the accounting needs of what rides a trip: the new tokens, the notes already kept,
    the (token, note) pairs attention reads, and the users."""
    tokens: int
    notes: int
    pairs: int
    users: int


def load(riders):
    """The Load of riders ([(notes before, new tokens)], or a Load already)."""
    if isinstance(riders, Load):
        return riders
    return Load(sum(t for _, t in riders), sum(n0 for n0, _ in riders), attended_pairs(riders),
                len(riders))


def typing_load(notes, users):
    """`users` users typing one token each, with `notes` notes each, counted without a list of
    them: a prediction's turning point may lie at billions of users."""
    return Load(users, notes * users, (notes + 1) * users, users)


def attention_flops(cfg, riders):
    """Scores q.k and the weighted sum of v: 2 FLOPs per number of every query head, for every
    allowed pair (a shared key/value head saves bytes, not math). Latent attention, as engines
    run it on the compressed notes: each head's scores over latent + rope numbers, its sum
    over latent."""
    per_pair = (2 * cfg.heads * (2 * cfg.latent + cfg.rope) if cfg.latent
                else 4 * cfg.heads * cfg.head)
    return cfg.layers * per_pair * load(riders).pairs / cfg.devices


def head_costs(cfg, riders):
    """The LM head on a trip: its table once, and, untied, the embedding rows of the new tokens,
    at the head's precision (head_dtype); the words of each user's last new token (2 FLOPs a
    head number, counted at the trip's math rate). -> (bytes, FLOPs)"""
    ride = load(riders)
    rows = 0 if cfg.tied else ride.tokens * cfg.width
    return ((cfg.vocab * cfg.width + rows) * number_bytes(head_dtype(cfg)) / cfg.devices,
            FLOPS_PER_NUMBER * cfg.vocab * cfg.width * ride.users / cfg.devices)


def costs(cfg, riders):
    """What each part of a trip must fetch and compute, on one device: {part: (bytes, FLOPs)}.
    The forklift brings the tables once (those the trip's tokens are routed to) and every note
    already in the notebooks the trip reads; the activations, and the notes written on this
    trip, are read back while still close by. The head, where counted, is a part of its own.
    riders: a list, or their Load."""
    ride = load(riders)
    parts = {"tables": (tables_read(cfg, ride.tokens), table_flops(cfg, ride.tokens)),
             "attention": (note_bytes(cfg) * notes_share(cfg) * ride.notes,
                           attention_flops(cfg, ride)),
             "elementwise": (0, elementwise_flops(cfg, ride.tokens))}
    return {**parts, "head": head_costs(cfg, ride)} if cfg.vocab else parts


ALL_REDUCES = 2  # per floor, split over devices: after attention's out, after the feed-forward's


def link_bytes(cfg, riders):
    """What each device sends over the link on a trip split over cfg.devices (tensor parallel):
    a ring all-reduce of the new tokens' (width,) activations, at 16 bits (32 in float32),
    twice a floor, sends 2 (devices - 1) / devices of it. 0 on one device."""
    tokens, n = load(riders).tokens, cfg.devices
    size = tokens * cfg.width * activation_bytes(cfg)
    return cfg.layers * ALL_REDUCES * size * 2 * (n - 1) / n


def bytes_read(cfg, riders):
    """What the forklift must bring for one trip."""
    return sum(b for b, _ in costs(cfg, riders).values())


def trip_flops(cfg, riders):
    """All the math of one trip: the tables for every token, causal attention, the rest."""
    return sum(f for _, f in costs(cfg, riders).values())


def link_wait(cfg, latency_s):
    """What a trip split over devices waits on its all-reduces however small they are: two a
    floor, each `latency_s`, none hidden behind work (each one's sum is the next product's
    input). 0 on one device."""
    return cfg.layers * ALL_REDUCES * latency_s if cfg.devices > 1 else 0


def limit(cfg, riders, bytes_per_s, flops_per_s, link_per_s=math.inf, latency_s=0):
    """The fastest a trip can be on a machine: max(fetching / forklift, math / workbench), and,
    split over devices, sending / the link between them, each send hidden behind the work but
    for the all-reduces' latency, which every floor waits out (link_wait).

    -> (seconds, "forklift", "workbench" or "link"): whichever job is slowest bounds the trip.
    """
    jobs = {"forklift": bytes_read(cfg, riders) / bytes_per_s,
            "workbench": trip_flops(cfg, riders) / flops_per_s,
            "link": link_bytes(cfg, riders) / link_per_s if cfg.devices > 1 else 0}
    wait = link_wait(cfg, latency_s)
    slowest = max(jobs, key=jobs.get)
    bound = "link" if jobs["link"] + wait > jobs[slowest] else slowest
    return jobs[slowest] + wait, bound


def serial_limit(cfg, riders, bytes_per_s, flops_per_s, link_per_s=math.inf, latency_s=0):
    """The same trip with the link's sends after the device's own work, not beside it: max(
    fetching, math) + sending + the all-reduces' latency. limit() is the other bound, every
    send hidden behind the work; an engine that overlaps none of its all-reduces pays this
    one. On one device they agree."""
    work = max(bytes_read(cfg, riders) / bytes_per_s, trip_flops(cfg, riders) / flops_per_s)
    return work + (link_bytes(cfg, riders) / link_per_s if cfg.devices > 1 else 0) + link_wait(
        cfg, latency_s)


def part_limits(cfg, riders, bytes_per_s, flops_per_s):
    """The fastest each part of a trip can be: {part: seconds}, each part on its own."""
    return {name: max(b / bytes_per_s, f / flops_per_s)
            for name, (b, f) in costs(cfg, riders).items()}


def activation_bytes(cfg):
    """What an activation weighs, kept between products and sent over a link: float32 where
    the math is (the post's model), else 16 bits (8-bit activations are made from 16-bit ones
    for each product, and engines all-reduce at 16 bits)."""
    return BYTES if (cfg.act_dtype or cfg.dtype) == "float32" else 2


def trip_scratch_bytes(cfg, riders):
    """A generous bound on the temporary memory of one trip, at the activations' precision: the
    attention scores (and causal bias) of its longest rider, and every token's activations on
    one floor: queries, keys and values, the feed-forward's two (up and gelu, or gate and up) of
    each expert it is routed to, the residual (12 x width a token in GPT-2)."""
    tokens = sum(t for _, t in riders)
    scores = max(cfg.heads * (n0 + t) * t for n0, t in riders) * 2  # scores + causal bias
    heads = (cfg.heads * (cfg.head + cfg.v_head) + cfg.latent + cfg.rope if cfg.latent
             else (cfg.heads + 2 * cfg.kv_heads) * cfg.head)
    per_token = (heads + 2 * max(cfg.ffn * max(cfg.active, 1) + cfg.shared, cfg.dense_ffn)
                 + cfg.width)
    return (scores + per_token * tokens) * activation_bytes(cfg) / cfg.devices


STEP_TOKENS = 8192  # the tokens an engine's step carries at most when it reads questions in
#                    chunks beside typing: vLLM's per-step budget for its server on a GPU of 70
#                    GiB or more (max_num_batched_tokens; 2048 on smaller ones)


def typing_scratch_bytes(cfg, notes, users):
    """The working space of `users` typing one token each with `notes` notes: the scores of one
    user at a time, and every user's activations (trip_scratch_bytes grown user by user)."""
    one, two = (trip_scratch_bytes(cfg, [(notes, 1)] * n) for n in (1, 2))
    return one + (users - 1) * (two - one)


def reading_scratch_bytes(cfg, prompt, users, step=STEP_TOKENS):
    """The working space of reading `users` questions of `prompt` tokens as engines read them,
    in steps of at most `step` tokens: a step's chunks of questions, the last chunk of one the
    deepest (its scores reach back over the whole question)."""
    chunk = min(prompt, step)
    return trip_scratch_bytes(cfg, [(prompt - chunk, chunk)] * max(
        1, min(users * prompt, step) // chunk))


def riders(segments):
    """What the accounting needs of a trip of model.py's: [(notes before, new tokens)], one per
    user. segments: [(notebook, t)], as model.trip takes them."""
    return [(book["len"], t) for book, t in segments for _ in range(book["k"].shape[1])]
