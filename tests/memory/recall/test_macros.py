from studio.memory.recall.macros import fill_macros, has_macros


def test_user_and_char_are_filled_case_insensitively_with_legacy_forms():
    text = "{{user}} meets {{Char}}. <USER> bows; <BOT> smiles. {{ char }} again."
    assert fill_macros(text, user="Wren", char="Hesper") == "Wren meets Hesper. Wren bows; Hesper smiles. Hesper again."


def test_a_missing_name_leaves_its_macro_visible():
    assert fill_macros("{{user}} and {{char}}", user="Wren") == "Wren and {{char}}"
    assert fill_macros("{{user}}", user="") == "{{user}}"


def test_names_with_regex_replacement_characters_are_inserted_literally():
    assert fill_macros("{{user}}", user=r"A\1 $0 \g<0>") == r"A\1 $0 \g<0>"


def test_has_macros():
    assert has_macros("Hi {{USER}}") and has_macros("<BOT>")
    assert not has_macros("plain {text} <b>")
