"""The memory proxy: an OpenAI-compatible `/v1/` that plays a save from any chat front end.

A front end (SillyTavern, RisuAI, the `openai` client, a game) sends its chat to
`POST /v1/chat/completions` with a studio API token as its key and `axiom/<save_id>/<model>`
as its model (`binding`). Each request syncs the save to the chat (`sync`: rewind what the
player swiped, edited or deleted, append what is new), adds the save's memory context to the
front end's prompt (`history.inject`), relays the request to the studio's model and the
answer back unchanged (`services`), and keeps the answer as a proposal for the next turn
until the chat carries it (`views`). docs/proxy.md describes it for players.
"""
