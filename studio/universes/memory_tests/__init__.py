"""A universe's memory tests, written by its author and kept with it (docs/authoring.md "Memory tests").

- `spec.py`: the declarative form (kinds, fields, `parse_spec`: the one check of the page, the
  API and the file); no Django;
- `models.py`: MemoryTest, the universe's rows;
- `services.py`: create, update, delete, replace all (a Universe-as-Code import);
- `toml.py`: the `[[memory_tests]]` tables of Universe-as-Code.

Running them is the saves app's (`studio/saves/memory_tests/`): a `context` test reads the
narrator's prompt, which is built there.
"""
