"""What the engine hands back for a turn: the parameters of a search and of the context with
their one set of limits (`query_params`), the clamped search (`search`, with the turns a
named time prefers from `temporal`), the memory context (`context`: the pipeline from its
policy, `policy`, through the registered layers, `layers`, and the one allocator, `allocate`,
in the one layout, `layout`, to the one renderer, `render`; the Lore Book's part in
`context_lore`, who is in focus in `focus`, the `{{user}}` / `{{char}}` macros in `macros`),
and replay after a lore change (`replay`)."""
