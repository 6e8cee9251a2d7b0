"""The memory proxy: an OpenAI-compatible `/v1/` that plays a save from any chat front end.

A front end (SillyTavern, RisuAI, the `openai` client, a game) sends its chat to
`POST /v1/chat/completions` with a studio API token as its key and, as its model,
`axiom/u/<universe>/<model>` (a save per chat: `chats`) or `axiom/s/<name>--<save_id>/<model>`
(`binding`). Each request is read strictly (`body`: strict JSON, typed fields; `history`: the
chat's messages within the turns' limits), held to the operator's limits (`spending`: allowed
models, `max_tokens` and `n` caps, the spend guards), syncs the save to the chat (`sync`: edit
in place, rewind, append; every write a step of `guard.SaveGuard`, so races answer 409),
adds the save's memory context to the front end's prompt (`history.inject`), relays the
request to the studio's model and the answer back unchanged (`services`), and keeps the
answer as a proposal for the next turn until the chat carries it (`views`). docs/proxy.md
describes it for players and operators.
"""
