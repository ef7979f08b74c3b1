"""The numbers the README shows come from a real run (python -m cli.docs) and still match
the manifest, which the TLC tests keep in step with TLC."""

from cli import docs


def test_the_readme_quick_tour_matches_the_manifest():
    assert docs.main(["--check"]) == 0


def test_the_check_bites_on_a_stale_number():
    block = docs.tour_block(docs.README.read_text())
    assert docs.rows(block), "no model rows found in the quick tour"
    stale = block.replace("23,768", "11,317")
    assert docs.rows(stale)["sync_flush"][0] == 11_317
