#!/usr/bin/env python3
"""Build the tokenizer fixture that warpdecode's C++ tokenizer is judged against.

Runs on a machine with Hugging Face `tokenizers` (and, for the chat goldens,
`transformers` + jinja2); needs no network. It

  1. generates a few MB of varied training text (prose, code, CJK, Arabic,
     Cyrillic, Devanagari, Greek, Hebrew, Thai, emoji with ZWJ sequences,
     combining marks, odd whitespace, digits) from a fixed seed;
  2. trains a small byte-level BPE with exactly Qwen2/Qwen3's pipeline:
     NFC normaliser; Split(Qwen regex, behavior=isolated, invert=false) then
     ByteLevel(add_prefix_space=false, use_regex=false); ByteLevel decoder and
     post-processor; BPE without unk / byte fallback; then Qwen3's added tokens
     in Qwen3's order with Qwen3's flags;
  3. saves tokenizer.json (Qwen's exact configuration) and tokenizer_flags.json
     (the same model plus added tokens exercising lstrip / rstrip / single_word
     / normalized, which Qwen's own tokens do not use);
  4. records the library's ids, tokens and decodes of a held-out string set
     (never seen in training) in expected.json, with the versions used;
  5. writes tokenizer_config.json (Qwen3's chat template) and
     generation_config.json as a Qwen3 checkpoint ships them (ids remapped to
     this vocabulary), and records transformers' rendering of a set of chat
     conversations (thinking on / off / unset) as chat goldens.

Usage:  python3 scripts/make_tokenizer_fixture.py OUT_DIR
        (OUT_DIR is created; the fixture belongs in tests/fixtures/tokenizer/)
Deterministic: same library versions -> same bytes.
"""

import json
import os
import platform
import random
import sys
import unicodedata

QWEN_SPLIT_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
    r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# Qwen3's added tokens, in id order, with their `special` flag. All of them are
# normalized=false, lstrip=rstrip=single_word=false, as Qwen3 ships them.
QWEN3_ADDED_TOKENS = [
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
    ("<|object_ref_start|>", True), ("<|object_ref_end|>", True),
    ("<|box_start|>", True), ("<|box_end|>", True),
    ("<|quad_start|>", True), ("<|quad_end|>", True),
    ("<|vision_start|>", True), ("<|vision_end|>", True),
    ("<|vision_pad|>", True), ("<|image_pad|>", True), ("<|video_pad|>", True),
    ("<tool_call>", False), ("</tool_call>", False),
    ("<|fim_prefix|>", False), ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False), ("<|fim_pad|>", False),
    ("<|repo_name|>", False), ("<|file_sep|>", False),
    ("<tool_response>", False), ("</tool_response>", False),
    ("<think>", False), ("</think>", False),
]

# Extra added tokens for tokenizer_flags.json: every AddedToken flag that the
# HF library honours, so the C++ side is checked on all of them.
# (content, special, normalized, lstrip, rstrip, single_word)
FLAG_TOKENS = [
    ("<|lstrip|>", True, False, True, False, False),
    ("<rstrip>", False, False, False, True, False),
    ("<both>", False, False, True, True, False),
    ("wdword", False, False, False, False, True),
    ("<sw>", False, False, False, False, True),
    ("caf\u00e9", False, True, False, False, False),        # NFC content, matched after NFC
    ("Cafe\u0301s", False, True, False, False, False),      # NFD content: pattern is its NFC
    ("[NORM]", True, True, False, False, False),            # special and normalized
    ("xyzzy", False, False, False, False, False),
    ("xyzzyplugh", False, False, False, False, False),      # leftmost-longest against xyzzy
    ("<|im", False, False, False, False, False),            # prefix of <|im_start|>
]

# Qwen3's chat template as the Qwen3 (hybrid thinking) checkpoints ship it in
# tokenizer_config.json. It is data here: transformers renders it to produce the
# golden prompts that warpdecode's native (non-Jinja) ChatML renderer must equal.
QWEN3_CHAT_TEMPLATE = (
    "{%- if tools %}\n"
    "    {{- '<|im_start|>system\\n' }}\n"
    "    {%- if messages[0].role == 'system' %}\n"
    "        {{- messages[0].content + '\\n\\n' }}\n"
    "    {%- endif %}\n"
    "    {{- \"# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>\" }}\n"
    "    {%- for tool in tools %}\n"
    "        {{- \"\\n\" }}\n"
    "        {{- tool | tojson }}\n"
    "    {%- endfor %}\n"
    "    {{- \"\\n</tools>\\n\\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\\"name\\\": <function-name>, "
    "\\\"arguments\\\": <args-json-object>}\\n</tool_call><|im_end|>\\n\" }}\n"
    "{%- else %}\n"
    "    {%- if messages[0].role == 'system' %}\n"
    "        {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}\n"
    "{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}\n"
    "{%- for message in messages[::-1] %}\n"
    "    {%- set index = (messages|length - 1) - loop.index0 %}\n"
    "    {%- if ns.multi_step_tool and message.role == \"user\" and message.content is string and "
    "not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}\n"
    "        {%- set ns.multi_step_tool = false %}\n"
    "        {%- set ns.last_query_index = index %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- for message in messages %}\n"
    "    {%- if message.content is string %}\n"
    "        {%- set content = message.content %}\n"
    "    {%- else %}\n"
    "        {%- set content = '' %}\n"
    "    {%- endif %}\n"
    "    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>' + '\\n' }}\n"
    "    {%- elif message.role == \"assistant\" %}\n"
    "        {%- set reasoning_content = '' %}\n"
    "        {%- if message.reasoning_content is string %}\n"
    "            {%- set reasoning_content = message.reasoning_content %}\n"
    "        {%- else %}\n"
    "            {%- if '</think>' in content %}\n"
    "                {%- set reasoning_content = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}\n"
    "                {%- set content = content.split('</think>')[-1].lstrip('\\n') %}\n"
    "            {%- endif %}\n"
    "        {%- endif %}\n"
    "        {%- if loop.index0 > ns.last_query_index %}\n"
    "            {%- if loop.last or (not loop.last and reasoning_content) %}\n"
    "                {{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content.strip('\\n') + "
    "'\\n</think>\\n\\n' + content.lstrip('\\n') }}\n"
    "            {%- else %}\n"
    "                {{- '<|im_start|>' + message.role + '\\n' + content }}\n"
    "            {%- endif %}\n"
    "        {%- else %}\n"
    "            {{- '<|im_start|>' + message.role + '\\n' + content }}\n"
    "        {%- endif %}\n"
    "        {%- if message.tool_calls %}\n"
    "            {%- for tool_call in message.tool_calls %}\n"
    "                {%- if (loop.first and content) or (not loop.first) %}\n"
    "                    {{- '\\n' }}\n"
    "                {%- endif %}\n"
    "                {%- if tool_call.function %}\n"
    "                    {%- set tool_call = tool_call.function %}\n"
    "                {%- endif %}\n"
    "                {{- '<tool_call>\\n{\"name\": \"' }}\n"
    "                {{- tool_call.name }}\n"
    "                {{- '\", \"arguments\": ' }}\n"
    "                {%- if tool_call.arguments is string %}\n"
    "                    {{- tool_call.arguments }}\n"
    "                {%- else %}\n"
    "                    {{- tool_call.arguments | tojson }}\n"
    "                {%- endif %}\n"
    "                {{- '}\\n</tool_call>' }}\n"
    "            {%- endfor %}\n"
    "        {%- endif %}\n"
    "        {{- '<|im_end|>\\n' }}\n"
    "    {%- elif message.role == \"tool\" %}\n"
    "        {%- if loop.first or (messages[loop.index0 - 1].role != \"tool\") %}\n"
    "            {{- '<|im_start|>user' }}\n"
    "        {%- endif %}\n"
    "        {{- '\\n<tool_response>\\n' }}\n"
    "        {{- content }}\n"
    "        {{- '\\n</tool_response>' }}\n"
    "        {%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}\n"
    "            {{- '<|im_end|>\\n' }}\n"
    "        {%- endif %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "    {%- if enable_thinking is defined and enable_thinking is false %}\n"
    "        {{- '<think>\\n\\n</think>\\n\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}"
)

# ---------------------------------------------------------------------------
# Text generators. Everything is drawn from random.Random(seed) so that the
# training corpus and the held-out set are reproducible and disjoint (different
# seeds, and the hand-written held-out strings below appear nowhere in training).

PROSE_EN = [
    "The kernel streams each expert's weight rows straight from memory.",
    "Small batches spend more time on bookkeeping than on arithmetic.",
    "She said it's fine, but we'll see whether they're right about it.",
    "A warp of thirty-two lanes owns exactly one output value.",
    "Nobody waits on anybody else; nothing is shared between warps.",
    "I'd rather measure twice and cut once, as the carpenters say.",
    "On Tuesday, 14 March 2023, the build took 3.5 minutes (down from 12).",
    "Why does the router renormalise the top-k weights? Because they must sum to one.",
    "It was the best of runs, it was the worst of runs: 118 tokens/s and then 64.",
    "\"Don't quote me,\" he said -- 'but the L2 cache is only 50 MB.'",
    "Prices rose 7% in Q3; the CEO's memo called it \u201ca blip\u201d.",
    "You've got mail! Check your inbox at support@example.com before 5 p.m.",
    "The quick brown fox jumps over the lazy dog near the riverbank.",
    "Read the manual, then read it again; most answers are on page 42.",
]
PROSE_FR = ["Le d\u00e9codage par warp inverse l'axe parall\u00e8le.", "Il \u00e9tait une fois une GPU tr\u00e8s rapide, \u00e0 No\u00ebl.",
            "\u00c7a marche tr\u00e8s bien, m\u00eame \u00e0 grande \u00e9chelle\u00a0!"]
PROSE_DE = ["Die Gewichte werden direkt aus dem Speicher gestreamt.", "Stra\u00dfenbahn, \u00c4pfel, \u00d6l und \u00dcberm\u00e4\u00dfigkeit."]
PROSE_ES = ["\u00bfD\u00f3nde est\u00e1 la biblioteca? \u00a1All\u00ed, se\u00f1or!", "El ni\u00f1o comi\u00f3 pi\u00f1a en el a\u00f1o 2024."]
PROSE_VI = ["Ti\u1ebfng Vi\u1ec7t c\u00f3 nhi\u1ec1u d\u1ea5u thanh \u0111i\u1ec7u.", "Ng\u01b0\u1eddi ta n\u00f3i r\u1eb1ng m\u1ecdi th\u1ee9 \u0111\u1ec1u \u1ed5n."]
PROSE_RU = ["\u041c\u044b \u0447\u0438\u0442\u0430\u0435\u043c \u0432\u0435\u0441\u0430 \u043f\u0440\u044f\u043c\u043e \u0438\u0437 \u043f\u0430\u043c\u044f\u0442\u0438.",
            "\u0421\u044a\u0435\u0448\u044c \u0436\u0435 \u0435\u0449\u0451 \u044d\u0442\u0438\u0445 \u043c\u044f\u0433\u043a\u0438\u0445 \u0444\u0440\u0430\u043d\u0446\u0443\u0437\u0441\u043a\u0438\u0445 \u0431\u0443\u043b\u043e\u043a.",
            "\u0412 2023 \u0433\u043e\u0434\u0443 \u0441\u043a\u043e\u0440\u043e\u0441\u0442\u044c \u0432\u044b\u0440\u043e\u0441\u043b\u0430 \u0432 1,84 \u0440\u0430\u0437\u0430."]
PROSE_UK = ["\u0407\u0436\u0430\u0447\u043e, \u0491\u0430\u043d\u043e\u043a \u0456 \u0454\u0434\u043d\u0456\u0441\u0442\u044c."]
PROSE_ZH = ["\u4e13\u5bb6\u6df7\u5408\u6a21\u578b\u7684\u89e3\u7801\u901f\u5ea6\u63d0\u9ad8\u4e86\u4e00\u500d\u3002",
            "\u6bcf\u4e2a\u7ebf\u7a0b\u675f\u8d1f\u8d23\u4e00\u4e2a\u8f93\u51fa\u503c\uff0c\u4e0d\u9700\u8981\u5171\u4eab\u5185\u5b58\u3002",
            "\u4eca\u5929\u5929\u6c14\u5f88\u597d\uff0c\u6211\u4eec\u53bb\u516c\u56ed\u6563\u6b65\u5427\uff01",
            "\u300a\u7ea2\u697c\u68a6\u300b\u662f\u4e2d\u56fd\u53e4\u5178\u5c0f\u8bf4\u4e4b\u4e00\u3002"]
PROSE_JA = ["\u3053\u306e\u30ab\u30fc\u30cd\u30eb\u306f\u91cd\u307f\u3092\u76f4\u63a5\u8aad\u307f\u8fbc\u307f\u307e\u3059\u3002",
            "\u6771\u4eac\u3067\u30e9\u30fc\u30e1\u30f3\u3092\u98df\u3079\u307e\u3057\u305f\u3002\u304a\u3044\u3057\u304b\u3063\u305f\uff01",
            "\uff8a\uff9d\uff76\uff78\uff76\uff80\uff76\uff85\u3068\u5168\u89d2\uff21\uff22\uff23\uff11\uff12\uff13"]
PROSE_KO = ["\ud55c\uad6d\uc5b4 \ubb38\uc7a5\ub3c4 \uc798 \ucc98\ub9ac\ud574\uc57c \ud569\ub2c8\ub2e4.",
            "\uc624\ub298 \ub0a0\uc528\uac00 \uc815\ub9d0 \uc88b\ub124\uc694!"]
PROSE_AR = ["\u064a\u0642\u0631\u0623 \u0627\u0644\u0646\u0648\u0627\u0629 \u0627\u0644\u0623\u0648\u0632\u0627\u0646 \u0645\u0628\u0627\u0634\u0631\u0629 \u0645\u0646 \u0627\u0644\u0630\u0627\u0643\u0631\u0629.",
            "\u0645\u064e\u0631\u0652\u062d\u064e\u0628\u064b\u0627 \u0628\u0650\u0627\u0644\u0639\u064e\u0627\u0644\u064e\u0645\u0650",
            "\u0627\u0644\u0639\u062f\u062f \u0661\u0662\u0663 \u064a\u0633\u0627\u0648\u064a 123."]
PROSE_HE = ["\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd, \u05d6\u05d4 \u05de\u05d1\u05d7\u05df.", "\u05e2\u05b4\u05d1\u05b0\u05e8\u05b4\u05d9\u05ea \u05e2\u05dd \u05e0\u05d9\u05e7\u05d5\u05d3"]
PROSE_HI = ["\u092f\u0939 \u0915\u0930\u094d\u0928\u0932 \u0938\u0940\u0927\u0947 \u092e\u0947\u092e\u094b\u0930\u0940 \u0938\u0947 \u092d\u093e\u0930 \u092a\u0922\u093c\u0924\u093e \u0939\u0948\u0964",
            "\u0915\u094d\u0937\u0924\u094d\u0930\u093f\u092f \u0936\u094d\u0930\u0940 \u0926\u094d\u0935\u093e\u0930 \u0968\u0966\u0968\u096a"]
PROSE_EL = ["\u0397 \u03b3\u03c1\u03ae\u03b3\u03bf\u03c1\u03b7 \u03ba\u03b1\u03c6\u03ad \u03b1\u03bb\u03b5\u03c0\u03bf\u03cd \u03c0\u03b7\u03b4\u03ac\u03b5\u03b9.", "\u03a3\u03bf\u03c6\u03af\u03b1 \u03ba\u03b1\u03b9 \u03b3\u03bd\u03ce\u03c3\u03b7; \u039d\u03b1\u03b9!"]
PROSE_TH = ["\u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22\u0e44\u0e21\u0e48\u0e21\u0e35\u0e0a\u0e48\u0e2d\u0e07\u0e27\u0e48\u0e32\u0e07\u0e23\u0e30\u0e2b\u0e27\u0e48\u0e32\u0e07\u0e04\u0e33"]
EMOJI = ["\U0001F600", "\U0001F44D\U0001F3FD", "\U0001F468\u200D\U0001F469\u200D\U0001F467\u200D\U0001F466",
         "\U0001F3F3\uFE0F\u200D\U0001F308", "\U0001F1EB\U0001F1F7", "\U0001F1EF\U0001F1F5", "1\uFE0F\u20E3",
         "\u2764\uFE0F", "\U0001F469\U0001F3FF\u200D\U0001F4BB", "\U0001F9D1\u200D\U0001F91D\u200D\U0001F9D1",
         "\u2728", "\U0001F680", "\U0001F525", "\U0001F914", "\u263A\uFE0F", "\U0001F44B\U0001F3FB"]
CODE = [
    "#include <cstdio>\n\nint main(int argc, char** argv) {{\n    std::printf(\"%d\\n\", argc);\n    return {num};\n}}\n",
    "def {name}(x, y={num}):\n    \"\"\"Return the {name} of x.\"\"\"\n    if x < 0:\n        raise ValueError(f\"bad {{x}}\")\n    return x * y + {num}\n",
    "for (size_t i = 0; i < {num}; ++i) {{\n\tacc += w[i] * x[i];  // FP32 accumulate\n}}\n",
    "const {name} = async (req, res) => {{\n  const {{ id }} = req.params;\n  res.json({{ ok: true, id }});\n}};\n",
    "SELECT {name}, COUNT(*) AS n FROM events WHERE ts >= '2024-01-{num2}' GROUP BY {name};\n",
    "__global__ void {name}_kernel(const float* __restrict__ x, float* y, int n) {{\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = __shfl_xor_sync(0xffffffff, x[i], 16);\n}}\n",
    "{{\"{name}\": [{num}, {num2}, null, true], \"nested\": {{\"k\": \"v\\u00e9\"}}}}\n",
    "<div class=\"{name}\">\n  <p>Hello &amp; welcome</p>\n</div>\r\n",
    "fn {name}(v: &[u32]) -> u64 {{ v.iter().map(|&x| x as u64).sum() }}\n",
    "$ ls -la /usr/lib/x86_64-linux-gnu | grep -E '^d' | wc -l\n{num}\n",
    "    if (ptr == nullptr) {{ return -{num}; }}   \n\n\n",
]
IDENTS = ["foo", "bar", "baz", "qux", "moe_gate_up", "warp_reduce", "topK", "camelCaseName", "snake_case_name",
          "HTTPServer", "x1", "tmp_2", "__init__", "getValue", "MAX_LEN", "i", "j", "kBlockSize"]
WHITESPACE = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r\n\r\n", " \n", "\n ", "\u00a0", "\u3000",
              "\u2003", "\u2009", " \t \n"]
# Combining sequences and decomposed forms: NFC composes some of them.
COMBINING = ["e\u0301", "a\u0300", "o\u0308", "n\u0303", "c\u0327", "A\u030a", "u\u031b\u0309", "i\u0323\u0302",
             "\u1100\u1161\u11a8", "\u1112\u1161\u11ab", "z\u0335\u0336", "q\u0307\u0323", "\u0915\u094d\u0937",
             "\u05e9\u05c1\u05b8", "\u0627\u0653"]
# Script blocks for random "words" (long-assigned letters only).
SCRIPT_RANGES = [
    (0x0061, 0x007A), (0x00E0, 0x00FF), (0x0100, 0x017F), (0x0391, 0x03A9), (0x03B1, 0x03C9),
    (0x0410, 0x044F), (0x05D0, 0x05EA), (0x0627, 0x064A), (0x0905, 0x0939), (0x0E01, 0x0E2E),
    (0x3041, 0x3093), (0x30A1, 0x30F6), (0x4E00, 0x4FFF), (0xAC00, 0xAD00), (0x10D0, 0x10F0),
]


def rand_word(rng):
    lo, hi = rng.choice(SCRIPT_RANGES)
    return "".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 8)))


def rand_number(rng):
    kind = rng.randrange(6)
    if kind == 0:
        return str(rng.randint(0, 10 ** rng.randint(1, 12)))
    if kind == 1:
        return f"{rng.uniform(-1e4, 1e4):.{rng.randint(0, 6)}f}"
    if kind == 2:
        return f"{rng.randint(0, 2**32):#x}"
    if kind == 3:
        return f"{rng.random():.3e}"
    if kind == 4:  # other digit scripts
        base = rng.choice([0x0660, 0x0966, 0xFF10, 0x0E50])
        return "".join(chr(base + rng.randint(0, 9)) for _ in range(rng.randint(1, 6)))
    return rng.choice(["\u00bd", "\u00b2", "\u2166", "\u2460", "3\u00bc", "10\u2076"])


def rand_code(rng):
    t = rng.choice(CODE)
    return t.format(name=rng.choice(IDENTS), num=rng.randint(0, 99999), num2=rng.randint(10, 28))


def rand_sentence(rng):
    pools = [PROSE_EN] * 6 + [PROSE_FR, PROSE_DE, PROSE_ES, PROSE_VI, PROSE_RU, PROSE_UK, PROSE_ZH, PROSE_ZH,
                              PROSE_JA, PROSE_KO, PROSE_AR, PROSE_HE, PROSE_HI, PROSE_EL, PROSE_TH]
    base = rng.choice(rng.choice(pools))
    words = base.split(" ")
    if len(words) > 2 and rng.random() < 0.5:
        rng.shuffle(words)
    out = []
    for w in words:
        r = rng.random()
        if r < 0.05:
            out.append(rand_word(rng))
        elif r < 0.09:
            out.append(rand_number(rng))
        elif r < 0.11:
            out.append(rng.choice(EMOJI))
        elif r < 0.13:
            out.append(w + rng.choice(COMBINING))
        elif r < 0.15:
            out.append(w.upper())
        else:
            out.append(w)
        out.append(rng.choice(WHITESPACE) if rng.random() < 0.08 else " ")
    return "".join(out).rstrip(" ")


def rand_document(rng):
    parts = []
    for _ in range(rng.randint(1, 12)):
        r = rng.random()
        if r < 0.6:
            parts.append(rand_sentence(rng))
        elif r < 0.85:
            parts.append(rand_code(rng))
        elif r < 0.93:
            parts.append(" ".join(rand_word(rng) for _ in range(rng.randint(1, 10))))
        else:
            parts.append(" ".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 5))))
        parts.append(rng.choice(["\n", " ", "\n\n", "\r\n", "  ", "\t"]))
    return "".join(parts)


def training_corpus(total_bytes, seed):
    rng = random.Random(seed)
    size = 0
    docs = []
    while size < total_bytes:
        d = rand_document(rng)
        docs.append(d)
        size += len(d.encode("utf-8"))
    return docs


# Held-out strings written for the regex, the normaliser and the added tokens.
STRESS = [
    "", " ", "  ", "\n", "\r\n", "\t", "a", "A", "0", "!", "\u00e9",
    "Hello world", "Hello  world", "Hello   world  ", "   leading spaces", "trailing spaces   ",
    "I'm sure you're right, they've said we'll go, he'd know, it's theirs.",
    "I'M SURE YOU'RE RIGHT; IT'S HE'LL AND SHE'D", "'s's'S 're 'RE 'Ve 'LL",
    "don\u2019t use curly apostrophes \u2018here\u2019", "the long s: '\u017f and 'K and '\u212a",
    "x's", "'", "''", "'''s", "a'b'c'd", "abc'", "'abc", "12's", " 's", "\n's",
    "line1\nline2\r\nline3\rline4", "a\n\n\nb", "a \n \n b", "a\t\n\tb", "  \n  ", "\n\n\n", "\r\r\n\n",
    "foo()\n\n", "end.\n", "x   \n", "ends with spaces   ", "  \t  ", "\t\tindented\tcode",
    "nbsp\u00a0here", "ideographic\u3000space", "line\u2028separator", "para\u2029graph", "nel\u0085char",
    "mongolian\u180evowel separator", "zero\u200bwidth", "vt\u000bff\u000cend", "fs\u001cgs\u001drs\u001eus\u001f.",
    "en\u2002em\u2003thin\u2009hair\u200anarrow\u202fmath\u205f.", "ogham\u1680space",
    "12345", "3.14159", "1,000,000", "x1y2z3", "\uff13\uff14\uff15", "\u0663\u0664\u0665", "\u096a\u096b",
    "\u216b \u00bd \u00b2 \u2460 \u3007", "v1.2.3-rc.4+build.5", "0xDEADbeef", "1e-10", "-42",
    "Cafe\u0301", "cafe\u0301 au lait", "\u212b \u2126 \u212a", "\uf900\uf901", "\u0344", "e\u0301\u0301",
    "\u1100\u1161\u11a8\u1100\u1161", "Tie\u0302\u0301ng Vie\u0323\u0302t", "A\u030a\u0301", "\u0958\u0959",
    "\u0915\u094d\u0937\u093f", "\u0627\u0644\u0652\u0639\u064e\u0631\u064e\u0628\u0650\u064a\u0651\u064e\u0629",
    "\u0301starts with a mark", "mark at end\u0301", "\u0301", "\u0301\u0302\u0303",
    "$hello %world ^caret", "...\n", "--->", "a.b.c", "!!!???", " ?!", "  !!", "(x)", "[[y]]", "{{z}}",
    "#include <stdio.h>", "std::vector<int> v{1, 2, 3};", "if (a && b || !c) { return; }",
    "https://example.com/path?q=1&r=2#frag", "user@example.com", "C:\\Windows\\System32",
    "\U0001F600\U0001F600\U0001F600", "\U0001F468\u200D\U0001F469\u200D\U0001F467\u200D\U0001F466 family",
    "\U0001F1EB\U0001F1F7\U0001F1E9\U0001F1EA", "1\uFE0F\u20E3 keycap", "\u2764\uFE0F\u200D\U0001F525",
    "\U0001F44D\U0001F3FD\U0001F44D\U0001F3FB", "\U0001FAE0 melting", "a\U0001F600b", " \U0001F600 ",
    "\x00nul", "\x01\x02\x7f", "\ue000private", "\ufffd replacement", "\ufeffbom", "\U0010fffd last plane",
    "\u0378unassigned", "\u00ad soft hyphen",
    # where PCRE2's and Oniguruma's \s differ (U+180E) or could (NEL, U+001C..1F, NBSP, ZWSP, U+2028)
    "x \u180ey", "a \u180e\u180eb", "\u180e \u180e", "x \u0085y", "x \u001cy", "x \u001fy", "x \u200by",
    "x\u00a0 y", "x \u00a0y", "\u2028\u2029 x", " \u3000\u3000x", "x \u2028y", "x\u180e\ny",
    "\u4f60\u597d\uff0c\u4e16\u754c\uff01", "\u3053\u3093\u306b\u3061\u306f\u4e16\u754c",
    "\uc548\ub155\ud558\uc138\uc694", "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440!",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
    "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e",
    "\u05e9\u05dc\u05d5\u05dd", "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35", "\u0393\u03b5\u03b9\u03ac",
    "mixed \u4e2d\u6587English\u65e5\u672c\u8a9e123\u0627\u0644\u0639\u0631\u0628\u064a\u0629",
    # added tokens inside text
    "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|><|im_start|>", "<|im_start", "< |im_start|>", "<|im_start|", "<<|im_end|>>",
    "abc<|im_end|>def", "x<think>y</think>z", "<think>\n\n</think>\n\n", "text<|endoftext|>",
    "<|endoftext|>", "<|im_end|><|endoftext|>", "<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
    "<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>", "e<|im_end|>\u0301", "<think>\u0301",
    " <|im_end|> ", "\n<|im_start|>\n", "<|IM_START|>", "<|vision_start|><|image_pad|><|vision_end|>",
    "<|lstrip|>", "   <|lstrip|>x", "a <rstrip>   b", "a   <both>   b", "\t<both>\t<both>\t",
    "wdword", "a wdword b", "awdword", "wdwordb", "(wdword)", "_wdword", "\u00e9wdword", "wdword\u0301",
    "<sw>", "a<sw>b", "x <sw> y", "caf\u00e9", "cafe\u0301", "le caf\u00e9 noir", "Caf\u00e9s", "Cafe\u0301s",
    "[NORM]", "x[NORM]y", "xyzzy", "xyzzyplugh", "xyzzyplug", "<|im_start|><|im", "<|imx",
]


def held_out_strings():
    rng = random.Random(20240607)  # a different stream from training
    out = list(STRESS)
    for _ in range(150):
        out.append(rand_document(rng)[: rng.randint(1, 400)])
    # random code points from assigned, long-stable blocks, incl. astral ones
    blocks = [(0x20, 0x7E), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x5FF),
              (0x600, 0x6FF), (0x900, 0x97F), (0xE00, 0xE5B), (0x1100, 0x11FF), (0x2000, 0x206F),
              (0x2190, 0x23FF), (0x3000, 0x30FF), (0x4E00, 0x9FA5), (0xAC00, 0xD7A3), (0xFF00, 0xFFEF),
              (0x1F300, 0x1F64F), (0x1F900, 0x1F9FF)]
    for _ in range(60):
        s = []
        for _ in range(rng.randint(1, 40)):
            lo, hi = rng.choice(blocks)
            c = chr(rng.randint(lo, hi))
            if unicodedata.category(c) in ("Cn", "Cs"):
                continue
            s.append(c)
        out.append("".join(s))
    out.append("a" * 3000)
    out.append("ab" * 1500)
    out.append(" " * 500 + "x")
    out.append("\n" * 300)
    out.append("9" * 1000)
    out.append("".join(rand_sentence(rng) + " " for _ in range(60)))
    return out


# ---------------------------------------------------------------------------


# The pipeline exactly as Qwen2/Qwen3 checkpoints spell it in tokenizer.json.
QWEN_PIPELINE = {
    "normalizer": {"type": "NFC"},
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": QWEN_SPLIT_REGEX}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
    ]},
    "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
    "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
}
QWEN_MODEL_FLAGS = {"dropout": None, "unk_token": None, "continuing_subword_prefix": "", "end_of_word_suffix": "",
                    "fuse_unk": False, "byte_fallback": False, "ignore_merges": False}


def build_tokenizer(docs, vocab_size):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_SPLIT_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    tok.train_from_iterator(docs, trainer=trainer, length=len(docs))
    # Re-spell the pipeline and the model flags exactly as Qwen's file does, and
    # load it back through the library's own parser.
    doc = json.loads(tok.to_str())
    doc.update(QWEN_PIPELINE)
    doc["model"].update(QWEN_MODEL_FLAGS)
    return Tokenizer.from_str(json.dumps(doc, ensure_ascii=False))


def add_qwen_tokens(tok):
    from tokenizers import AddedToken
    for content, special in QWEN3_ADDED_TOKENS:
        t = AddedToken(content, single_word=False, lstrip=False, rstrip=False, normalized=False, special=special)
        if special:
            tok.add_special_tokens([t])
        else:
            tok.add_tokens([t])


def add_flag_tokens(tok):
    from tokenizers import AddedToken
    for content, special, normalized, lstrip, rstrip, single_word in FLAG_TOKENS:
        t = AddedToken(content, single_word=single_word, lstrip=lstrip, rstrip=rstrip, normalized=normalized,
                       special=special)
        if special:
            tok.add_special_tokens([t])
        else:
            tok.add_tokens([t])


def encode_case(tok, name, text, encode_special_tokens=False):
    if hasattr(tok, "encode_special_tokens"):
        tok.encode_special_tokens = encode_special_tokens
    elif encode_special_tokens:
        return None
    enc = tok.encode(text, add_special_tokens=False)
    ids = list(enc.ids)
    case = {
        "tokenizer": name,
        "text": text,
        "encode_special_tokens": encode_special_tokens,
        "ids": ids,
        "tokens": list(enc.tokens),
        "decoded": tok.decode(ids, skip_special_tokens=False),
        "decoded_skip_special": tok.decode(ids, skip_special_tokens=True),
        "nfc": unicodedata.normalize("NFC", text),
    }
    if name == "main" and not encode_special_tokens:
        # The Split + ByteLevel pieces of the NFC text alone (no added-token
        # extraction): a direct check of the regex, independent of the merges.
        normalized = tok.normalizer.normalize_str(text)
        case["pieces"] = [piece for piece, _ in tok.pre_tokenizer.pre_tokenize_str(normalized)]
    if hasattr(tok, "encode_special_tokens"):
        tok.encode_special_tokens = False
    return case


def decode_cases(tok, name):
    """Id sequences that split characters, mix added tokens with partial bytes,
    and decode added tokens whose text is not ASCII."""
    cases = []
    vocab = tok.get_vocab()
    byte_ids = {}
    from tokenizers import pre_tokenizers
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    # the byte-level symbol of each byte: recover it by pre-tokenizing the byte's text where it is valid UTF-8
    for ch in alphabet:
        if ch in vocab:
            byte_ids[ch] = vocab[ch]

    def ids_of(text):
        return list(tok.encode(text, add_special_tokens=False).ids)

    im_end = tok.token_to_id("<|im_end|>")
    think = tok.token_to_id("<think>")
    seqs = []
    for text in ["\u00e9", "\u4e2d", "\U0001F600", "a\u00e9b", "\u4e2d\u6587"]:
        ids = ids_of(text)
        seqs.append(ids)
        seqs.append(ids[:-1] if len(ids) > 1 else [])
        seqs.append(ids[1:] if len(ids) > 1 else [])
    # single byte symbols of a multibyte character, one by one, and with added tokens between them
    single = sorted(byte_ids.values())
    rng = random.Random(7)
    for _ in range(20):
        seqs.append([rng.choice(single) for _ in range(rng.randint(1, 6))])
    smiley = "\U0001F600".encode("utf-8")
    bl = {b: c for b, c in zip(range(256), _bytes_to_unicode())}
    sm_ids = [vocab[bl[b]] for b in smiley]
    seqs.append(sm_ids)
    seqs.append(sm_ids[:2] + [im_end] + sm_ids[2:])
    seqs.append(sm_ids[:3] + [think] + sm_ids[3:])
    seqs.append([im_end, think] + sm_ids[:1])
    for content, _ in QWEN3_ADDED_TOKENS:
        seqs.append([tok.token_to_id(content)])
    for content, *_ in FLAG_TOKENS:
        tid = tok.token_to_id(content)
        if tid is not None:
            seqs.append([tid])
    for ids in seqs:
        cases.append({
            "tokenizer": name,
            "ids": ids,
            "decoded": tok.decode(ids, skip_special_tokens=False),
            "decoded_skip_special": tok.decode(ids, skip_special_tokens=True),
        })
    return cases


def _bytes_to_unicode():
    """GPT-2's byte -> printable character table (the ByteLevel alphabet, in byte order)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    chars = []
    extra = 0
    for b in range(256):
        if b in printable:
            chars.append(chr(b))
        else:
            chars.append(chr(256 + extra))
            extra += 1
    return chars


CHATS = [
    # (messages, add_generation_prompt, enable_thinking: True / False / None = not passed)
    ([{"role": "user", "content": "Hello!"}], True, None),
    ([{"role": "user", "content": "Hello!"}], True, True),
    ([{"role": "user", "content": "Hello!"}], True, False),
    ([{"role": "user", "content": "Hello!"}], False, None),
    ([{"role": "system", "content": "You are terse."}, {"role": "user", "content": "2+2?"}], True, False),
    ([{"role": "system", "content": "You are terse."}, {"role": "user", "content": "2+2?"}], True, None),
    ([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello. How can I help?"},
      {"role": "user", "content": "Tell me a joke."}], True, None),
    ([{"role": "user", "content": "Hi"},
      {"role": "assistant", "content": "<think>\nThe user greets me.\n</think>\n\nHello!"},
      {"role": "user", "content": "Again"}], True, False),
    ([{"role": "user", "content": "Hi"},
      {"role": "assistant", "content": "<think>\nThe user greets me.\n</think>\n\nHello!"}], False, None),
    ([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Plain answer."}], False, None),
    ([{"role": "user", "content": "Hi"},
      {"role": "assistant", "content": "Answer", "reasoning_content": "\n\nsome reasoning\n\n"}], False, None),
    ([{"role": "user", "content": "Q1"},
      {"role": "assistant", "content": "A1", "reasoning_content": "R1"},
      {"role": "user", "content": "Q2"},
      {"role": "assistant", "content": "<think>R2</think>A2"}], True, True),
    ([{"role": "system", "content": "S1"}, {"role": "user", "content": "U"},
      {"role": "system", "content": "S2 in the middle"}, {"role": "assistant", "content": "A"}], True, False),
    ([{"role": "user", "content": "multi\nline\n\ncontent with <|im_end|> inside"}], True, None),
    ([{"role": "user", "content": "\u4f60\u597d\uff0c\u4e16\u754c \U0001F600 cafe\u0301"}], True, False),
    ([{"role": "user", "content": "<tool_response>\nok\n</tool_response>"},
      {"role": "assistant", "content": "<think>\nhm\n</think>\n\ndone"}], False, None),
    ([{"role": "user", "content": "a"}, {"role": "assistant", "content": "\n\nleading newlines"},
      {"role": "user", "content": "b"}, {"role": "assistant", "content": "<think>x</think>\n\n\nafter"}], False, None),
    ([{"role": "user", "content": ""}], True, False),
]


def chat_goldens(out_dir, tok):
    import transformers
    results = {"transformers_version": transformers.__version__, "cases": [], "error": None,
               "tokenizer_class_loaded": None, "encode_mismatches": []}
    try:
        hf = transformers.AutoTokenizer.from_pretrained(out_dir)
    except Exception as e:  # noqa: BLE001 -- recorded, the fallback below is the plain file
        results["error"] = f"AutoTokenizer.from_pretrained failed: {type(e).__name__}: {e}"
        hf = transformers.PreTrainedTokenizerFast(tokenizer_file=os.path.join(out_dir, "tokenizer.json"))
        hf.chat_template = QWEN3_CHAT_TEMPLATE
    results["tokenizer_class_loaded"] = type(hf).__name__
    for messages, gen, thinking in CHATS:
        kwargs = {"tokenize": False, "add_generation_prompt": gen}
        if thinking is not None:
            kwargs["enable_thinking"] = thinking
        try:
            text = hf.apply_chat_template(messages, **kwargs)
        except Exception as e:  # noqa: BLE001
            results["cases"].append({"messages": messages, "add_generation_prompt": gen,
                                     "enable_thinking": thinking, "error": f"{type(e).__name__}: {e}"})
            continue
        results["cases"].append({"messages": messages, "add_generation_prompt": gen, "enable_thinking": thinking,
                                 "text": text, "ids": list(tok.encode(text, add_special_tokens=False).ids)})
    return results, hf


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_tokenizer_fixture.py OUT_DIR")
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    import tokenizers

    docs = training_corpus(total_bytes=3 * 1024 * 1024, seed=1234)
    tok = build_tokenizer(docs, vocab_size=6000)
    add_qwen_tokens(tok)
    main_path = os.path.join(out_dir, "tokenizer.json")
    tok.save(main_path, pretty=False)

    flags = tokenizers.Tokenizer.from_file(main_path)
    add_flag_tokens(flags)
    flags.save(os.path.join(out_dir, "tokenizer_flags.json"), pretty=False)

    ids = {content: tok.token_to_id(content) for content, _ in QWEN3_ADDED_TOKENS}
    config = {
        "add_bos_token": False, "add_prefix_space": False,
        "added_tokens_decoder": {str(ids[c]): {"content": c, "lstrip": False, "normalized": False, "rstrip": False,
                                               "single_word": False, "special": s} for c, s in QWEN3_ADDED_TOKENS},
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
                                      "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>",
                                      "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>",
                                      "<|video_pad|>"],
        "bos_token": None, "chat_template": QWEN3_CHAT_TEMPLATE, "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>", "errors": "replace", "model_max_length": 131072, "pad_token": "<|endoftext|>",
        "split_special_tokens": False, "tokenizer_class": "Qwen2Tokenizer", "unk_token": None,
    }
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, ensure_ascii=True)
        f.write("\n")
    generation = {
        "bos_token_id": ids["<|endoftext|>"], "do_sample": True,
        "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]], "pad_token_id": ids["<|endoftext|>"],
        "temperature": 0.6, "top_k": 20, "top_p": 0.95, "transformers_version": "4.51.0",
    }
    with open(os.path.join(out_dir, "generation_config.json"), "w", encoding="utf-8") as f:
        json.dump(generation, f, indent=2)
        f.write("\n")

    cases = []
    texts = held_out_strings()
    train_text = "\n".join(docs)
    for text in texts:
        cases.append(encode_case(tok, "main", text))
        cases.append(encode_case(flags, "flags", text))
        if "<|" in text:
            for t, name in ((tok, "main"), (flags, "flags")):
                c = encode_case(t, name, text, encode_special_tokens=True)
                if c is not None:
                    cases.append(c)
    cases = [c for c in cases if c is not None]
    decodes = decode_cases(tok, "main") + decode_cases(flags, "flags")

    expected = {
        "about": "Encodings by Hugging Face tokenizers of held-out strings, for warpdecode's tokenizer tests. "
                 "Generated by scripts/make_tokenizer_fixture.py; do not edit.",
        "versions": {"tokenizers": tokenizers.__version__, "python": platform.python_version(),
                     "python_unicodedata": unicodedata.unidata_version},
        "split_regex": QWEN_SPLIT_REGEX,
        "tokenizer_files": {"main": "tokenizer.json", "flags": "tokenizer_flags.json"},
        "training": {"bytes": len(train_text.encode("utf-8")), "documents": len(docs), "vocab_size_target": 6000,
                     "model_vocab_size": tok.get_vocab_size(with_added_tokens=False),
                     "held_out_strings_in_training": sum(1 for t in STRESS if len(t) > 12 and t in train_text)},
        "cases": cases,
        "decode_cases": decodes,
    }
    try:
        chat, hf = chat_goldens(out_dir, tok)
        expected["versions"]["transformers"] = chat["transformers_version"]
        # transformers' own encodings of the main cases must equal the library's
        for c in cases:
            if c["tokenizer"] == "main" and not c["encode_special_tokens"]:
                hf_ids = list(hf(c["text"], add_special_tokens=False)["input_ids"])
                if hf_ids != c["ids"]:
                    chat["encode_mismatches"].append({"text": c["text"], "transformers_ids": hf_ids})
        expected["chat"] = chat
    except ImportError as e:
        expected["chat"] = {"error": f"transformers unavailable: {e}", "cases": []}

    with open(os.path.join(out_dir, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(expected, f, ensure_ascii=True, indent=0)
        f.write("\n")

    total = sum(os.path.getsize(os.path.join(out_dir, n)) for n in os.listdir(out_dir))
    print(f"wrote {out_dir}: {len(cases)} encode cases, {len(decodes)} decode cases, "
          f"{len(expected['chat'].get('cases', []))} chat cases, {total / 1e6:.2f} MB; "
          f"tokenizers {tokenizers.__version__}, transformers {expected['versions'].get('transformers', 'none')}")
    if expected["chat"].get("error"):
        print("note:", expected["chat"]["error"])
    if expected["chat"].get("encode_mismatches"):
        print(f"note: transformers disagreed with tokenizers on {len(expected['chat']['encode_mismatches'])} strings")


if __name__ == "__main__":
    main()
