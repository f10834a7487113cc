"""The worker's prefix KV cache keeps each shared prefix once: two chats of one system prompt
must not take two slots and push another system prompt out (issue 24, item 1)."""

from __future__ import annotations

import torch

from control.executor.adapters.prefix_cache import PrefixKvCache

LAYERS, HEADS, DIM = 2, 2, 4
BYTES_PER_TOKEN = LAYERS * 2 * HEADS * DIM * 4  # (key, value) x fp32


def kv(tokens: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """A prompt's fake KV: position i holds the token id, so a view shows which tokens it is."""
    t = torch.tensor(tokens, dtype=torch.float32).view(1, 1, -1, 1).expand(1, HEADS, -1, DIM)
    return [(t.clone(), t.clone()) for _ in range(LAYERS)]


def prompt(system: int, question: int) -> list[int]:
    return [1000 * system + i for i in range(40)] + [9, question, question + 1]


def test_two_system_prompts_stay_while_their_chats_come_in_turn() -> None:
    cache = PrefixKvCache(2 * 45 * BYTES_PER_TOKEN)  # room for about two prompts
    for q in range(6):
        for system in (1, 2):
            p = prompt(system, 10 * q)
            hit, _ = cache.lookup(p)
            assert hit == (0 if q == 0 else 41)  # the system prompt and the shared "9"
            cache.store(p, kv(p))
    assert len(cache) == 2 and cache.used_bytes <= cache.max_bytes


def test_a_sibling_keeps_the_shared_prefix_once_with_its_own_values() -> None:
    cache = PrefixKvCache(10 * 45 * BYTES_PER_TOKEN)
    first, second = prompt(1, 10), prompt(1, 20)
    cache.store(first, kv(first))
    cache.store(second, kv(second))
    assert len(cache) == 1 and cache.used_bytes == 41 * BYTES_PER_TOKEN
    hit, views = cache.lookup(prompt(1, 30))
    assert hit == 41 and views[0][0][0, 0, :, 0].tolist() == first[:41]


def test_a_next_turn_replaces_the_turn_it_extends_and_a_covered_prompt_adds_nothing() -> None:
    cache = PrefixKvCache(10 * 45 * BYTES_PER_TOKEN)
    turn1 = prompt(1, 10)
    turn2 = turn1 + [5, 6, 7]
    cache.store(turn1, kv(turn1))
    cache.store(turn2, kv(turn2))
    assert len(cache) == 1 and cache.used_bytes == len(turn2) * BYTES_PER_TOKEN
    cache.store(turn1, kv(turn1))
    assert len(cache) == 1 and cache.lookup(turn2 + [8])[0] == len(turn2)


def test_prompts_sharing_only_a_short_header_keep_entries_of_their_own() -> None:
    cache = PrefixKvCache(10 * 45 * BYTES_PER_TOKEN)
    a, b = [7, 7, 7] + prompt(1, 10), [7, 7, 7] + prompt(2, 10)
    cache.store(a, kv(a))
    cache.store(b, kv(b))
    assert len(cache) == 2
    assert cache.lookup(a + [1])[0] == len(a) and cache.lookup(b + [1])[0] == len(b)


def test_a_hit_on_a_shared_header_only_does_not_keep_an_unrelated_prompt() -> None:
    """Prompts 1 and 2 are held, 2 the more recent; prompt 3 shares only a template header with
    both. Storing it must evict 1 (least recently used), not 2, which its header hit found."""
    cache = PrefixKvCache(2 * 50 * BYTES_PER_TOKEN)
    one, two, three = ([7, 7, 7] + prompt(s, 10) for s in (1, 2, 3))
    for p in (two, one):
        cache.store(p, kv(p))
    cache.lookup(two + [1])  # 2 is the most recently used now
    assert cache.lookup(three)[0] == 3  # the header: found in 1 (the first of equal hits)
    cache.store(three, kv(three))
    assert cache.lookup(two + [1])[0] == len(two) and cache.lookup(one + [1])[0] == 3
