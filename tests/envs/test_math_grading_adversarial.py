"""Math-v0: a box that hedges between values scores 0 in any notation; equal answers score 1."""

from __future__ import annotations

import gymnasium as gym
import pytest

import agentgym  # noqa: F401  (registers the envs)
from agentgym.core import run_sync
from agentgym.envs.math.answers import canonical, perturbations, stated
from agentgym.envs.math.grading import check_answer, grade, verify_answer

# (reference, a wrong value): each hedge below names both, the reference last or first
PAIRS = [
    ("3", "4"),
    ("4", "3"),
    ("\\frac{1}{2}", "\\frac{1}{3}"),
    ("-2", "2"),
    ("x+1", "x-1"),
    ("\\frac{\\pi}{2}", "\\pi"),
    ("10", "12"),
]
HEDGES = [
    "{w} \\lor {g}", "{g} \\lor {w}", "{w} \\vee {g}", "{w} \\land {g}", "{w} \\wedge {g}",
    "{w} \\cup {g}", "{w}\\cup{g}", "\\{{{w}\\}} \\cup \\{{{g}\\}}", "{w} \\cap {g}",
    "{w} \\sqcup {g}", "{w} \\bigcup {g}", "{w} \\uplus {g}", "{g} \\setminus {w}",
    "{w} \\text{{ or }} {g}", "{g}\\text{{ or }}{w}", "{w} or {g}", "{w} \\mathrm{{ or }} {g}",
    "{w} \\textrm{{ or }} {g}", "{w} \\mbox{{ or }} {g}", "{w} \\operatorname{{or}} {g}",
    "{w} \\textbf{{ or }} {g}", "{w} \\emph{{ or }} {g}", "{w} \\texttt{{ or }} {g}",
    "{w} \\ \\mathrm{{or}}\\ {g}", "{w}\\,\\text{{or}}\\,{g}", "{w}\\quad\\text{{or}}\\quad {g}",
    "\\text{{either }} {w} \\text{{ or }} {g}", "{w} \\text{{ and/or }} {g}",
    "{w} \\text{{ resp. }} {g}", "{w} \\text{{ oder }} {g}", "{w} \\text{{ xor }} {g}",
    "\\text{{{w} or {g}}}", "\\mathrm{{{w} or {g}}}", "{w}, {g}", "{w} ; {g}",
    "{w} \\text{{, }} {g}", "{w}, \\text{{ or }} {g}", "{w} \\text{{ and }} {g}", "{g}, {g}, {w}",
    "{g} \\lor {g} \\lor {w}",
    "\\{{{w}, {g}\\}}", "\\left\\{{ {w}, {g} \\right\\}}", "\\{{{w}\\}} \\vee \\{{{g}\\}}",
    "x \\in \\{{{w}, {g}\\}}", "x \\in \\{{{w}\\}} \\cup \\{{{g}\\}}", "x = {w} \\lor x = {g}",
    "x={w} \\text{{ or }} x={g}", "{w} \\text{{ or }} x = {g}", "{w} \\lor x = {g}", "\\pm {g}",
    "{w} \\mp {g}", "\\pm {g} \\mp {w}", "{w} \\mid {g}", "{g} \\mid {w}", "{w}|{g}",
    "{w} \\| {g}", "{w} \\vert {g}", "{w} \\quad {g}", "{w} \\qquad {g}", "{w} \\\\ {g}",
    "{w}\\\\{g}", "{w} \\newline {g}", "{w} \\hspace{{1cm}} {g}", "{w} \\; {g}", "{w} \\, {g}",
    "{w} \\ {g}", "{w} ~ {g}", "{w} \\! {g}", "{w} \\& {g}", "{w} = {g}", "x = {w} = {g}",
    "{w} \\approx {g}", "{w} \\neq {g}", "{w} \\Rightarrow {g}", "{w} \\implies {g}",
    "{w} \\iff {g}", "{w} \\to {g}", "{w} \\sim {g}", "{w} \\cong {g}", "{w} \\colon {g}",
    "{w} \\ge {g}", "{w} \\leq x \\leq {g}", "x \\in [{w}, {g}]", "[{w}, {g}]", "({w}, {g})",
    "{w} \\curlyvee {g}", "{w} \\bigvee {g}", "{w} \\star {g}", "{w} \\diamond {g}",
    "{w} \\amalg {g}", "{w} \\oplus {g}", "{w} \\bmod {g}", "{w} \\parallel {g}",
    "{w} \\dots {g}", "{w} \\ldots {g}", "{w} \\cdots {g}", "{w} \\vphantom{{x}} {g}",
    "{w} \\max {g}", "{w} \\min {g}", "{w} \\sum {g}", "{w} \\lfloor {g}", "{w} \\circ {g}",
    "{w} \\% {g}", "{w} \\frac {g}", "{w} \\binom {g}", "{w} \\mathbb {g}", "{w} \\langle {g}",
    "{w} \\overset{{?}}{{=}} {g}", "{g} \\text{{ (or maybe }} {w})", "{w} \\text{{ (i.e. }} {g})",
    "{w} \\text{{ (}} {g} \\text{{)}}", "{g} \\text{{ (not }} {w})", "{w} ({g})", "{w}\\;({g})",
    "\\left( {w} \\lor {g} \\right)", "\\sqrt{{{w} \\lor {g}}}", "{w} ∨ {g}", "{w} ∪ {g}",
    "\\begin{{cases}} {w} \\\\ {g} \\end{{cases}}", "\\{{ {w} \\}} \\text{{ or }} \\{{ {g} \\}}",
]  # fmt: skip


@pytest.mark.parametrize("index", range(len(HEDGES)), ids=HEDGES)
def test_a_hedge_scores_zero(index: int) -> None:
    """Each notation, with two of the reference/wrong pairs (so both orders and kinds of value
    come up across the list)."""
    for reference, wrong in (PAIRS[index % len(PAIRS)], PAIRS[(index + 3) % len(PAIRS)]):
        answer = HEDGES[index].format(g=reference, w=wrong)
        correct, _ = check_answer(reference, answer)
        assert not correct, f"{answer!r} graded equal to {reference!r}"


def test_math_verify_alone_takes_hedges() -> None:
    """Why the rule exists: math-verify keeps the last expression around what it cannot read."""
    assert verify_answer("4", "3 \\lor 4")
    assert verify_answer("4", "3 \\star 4")
    assert not check_answer("4", "3 \\lor 4")[0]
    assert not check_answer("4", "3 \\star 4")[0]


MULTI = {
    "1, 2": ["1, 2, 3", "1", "1 \\lor 2 \\lor 3", "\\{1, 2, 3\\}", "1, 1", "(1, 2) \\cup 3"],
    "\\pm 3": ["3", "\\pm 4", "3, -3, 4", "-3"],
    "(1, 2)": ["(2, 1)", "(1, 2) \\text{ or } (2, 1)", "1, 2", "(1, 2), (2, 1)"],
    "[2, 4]": ["(2, 4)", "[2, 4] \\cup [5, 6]", "[1, 5]", "3"],
    "(-\\infty, 1) \\cup (2, \\infty)": ["\\mathbb{R}", "(-\\infty, 2) \\cup (2, \\infty)"],
    "x^2 + y^2 = 1": ["x^2 + y^2 = 1 \\text{ or } x^2 + y^2 = 2", "x^2 + y^2 = 2"],
}


@pytest.mark.parametrize("reference", sorted(MULTI))
def test_several_valued_references_need_exactly_their_values(reference: str) -> None:
    for answer in MULTI[reference]:
        assert not check_answer(reference, answer)[0], f"{answer!r} vs {reference!r}"


EQUIVALENT = {
    "1/2": [
        "1/2", "0.5", ".5", "0.50", "\\frac{1}{2}", "\\dfrac{1}{2}", "\\dfrac12", "\\tfrac{1}{2}",
        "\\frac12", "\\frac 1 2", "\\cfrac{1}{2}", "\\frac{2}{4}", "1 / 2", "$\\frac{1}{2}$",
        "\\left( \\frac{1}{2} \\right)", "\\left(\\dfrac{1}{2}\\right)", "x = \\frac{1}{2}",
        "x=\\tfrac12", "\\displaystyle \\frac{1}{2}", "\\boldsymbol{\\frac{1}{2}}",
    ],
    "3": [
        "3", "3.0", "003", "x = 3", "y=3", "f(2) = 3", "a_1 = 3", "x = 2 + 1 = 3", "1+2",
        "\\sqrt{9}", "3 \\cdot 1", "3^{1}", "\\{3\\}", "\\text{3}", "\\mathbf{3}",
        "3 \\text{ or } 3",
    ],
    "1000": ["1000", "1,000", "1{,}000", "10^3", "1000.0"],
    "90": ["90^\\circ", "90^{\\circ}"],
    "5": ["5 \\text{ cm}", "5\\text{ cm}^2", "\\$5", "5 \\text{ apples}", "5\\text{m}"],
    "50": ["50\\%", "50%"],
    "-\\frac{3}{4}": ["-\\frac{3}{4}", "-0.75", "\\frac{-3}{4}", "-\\dfrac34", "-3/4"],
    "2\\sqrt{3}": ["2\\sqrt{3}", "\\sqrt{12}", "2 \\sqrt 3", "\\sqrt{3} \\cdot 2"],
    "\\frac{\\pi}{2}": ["\\frac{\\pi}{2}", "\\pi/2", "\\frac{1}{2}\\pi", "0.5\\pi"],
    "x^2+1": ["x^2+1", "1+x^2", "y = x^2 + 1", "x^{2} + 1"],
    "1, 2": [
        "1, 2", "2, 1", "2,1", "\\{1, 2\\}", "1 \\text{ and } 2", "x = 1 \\text{ or } x = 2",
        "x=1, x=2", "1 \\lor 2", "x \\in \\{1, 2\\}", "\\{1\\} \\cup \\{2\\}",
    ],
    "\\{1, 2\\}": ["1, 2", "\\{2, 1\\}", "\\left\\{1,2\\right\\}"],
    "(1, 2)": ["(1, 2)", "\\left(1, 2\\right)", "(1,2)"],
    "[2, 4]": ["[2, 4]", "\\left[2,4\\right]"],
    "\\pm 3": ["\\pm 3", "3, -3", "-3, 3", "x = \\pm 3", "\\{-3, 3\\}"],
    "\\frac{1 \\pm \\sqrt{5}}{2}": [
        "\\frac{1 \\pm \\sqrt{5}}{2}",
        "\\frac{1+\\sqrt{5}}{2}, \\frac{1-\\sqrt{5}}{2}",
    ],
    "(-\\infty, 1) \\cup (2, \\infty)": [
        "(-\\infty, 1) \\cup (2, \\infty)",
        "(2, \\infty) \\cup (-\\infty, 1)",
    ],
    "\\text{(C)}": ["\\text{(C)}", "\\textbf{(C)}", "C", "\\text{C}", "(C)"],
    "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}": [
        "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}",
        "\\begin{pmatrix}1\\\\2\\end{pmatrix}",
    ],
    "y = 2x + 1": ["y = 2x + 1", "y=1+2x", "2x+1"],
    "x^2 + y^2 = 1": ["x^2 + y^2 = 1", "y^2 + x^2 = 1"],
    "2 < x < 5": ["2 < x < 5"],
    "e": ["e", "e^{1}"],
    "\\infty": ["\\infty", "+\\infty"],
    "0": ["0", "0.0", "x = 0", "-0"],
    "\\log_2 8": ["3", "\\log_2 8", "\\log_{2}8"],
    "12": ["12", "\\binom{4}{2} \\cdot 2", "4!/2", "\\frac{24}{2}"],
}  # fmt: skip


@pytest.mark.parametrize("reference", sorted(EQUIVALENT))
def test_equal_answers_in_any_form_score(reference: str) -> None:
    for answer in EQUIVALENT[reference]:
        correct, why = check_answer(reference, answer)
        assert correct, f"{answer!r} graded unequal to {reference!r} ({why})"


def test_exact_tasks_still_need_the_written_form() -> None:
    assert check_answer("2/3", "\\frac{2}{3}", exact=True)[0]
    assert not check_answer("2/3", "4/6", exact=True)[0]
    assert not check_answer("2/3", "\\frac{2}{3} \\lor \\frac{4}{6}", exact=True)[0]


def score(response: str, reference: str) -> tuple[bool, str, str]:
    verdict = run_sync(grade(response, reference, exact=False, timeout=30))
    return verdict.correct, verdict.reason, verdict.detail


def test_the_verdict_says_why_a_hedge_is_wrong() -> None:
    correct, reason, detail = score("So \\boxed{3 \\lor 4}.", "4")
    assert (correct, reason) == (False, "wrong")
    assert "several values" in detail
    correct, reason, detail = score("\\boxed{3 \\star 4}", "4")
    assert (correct, reason) == (False, "wrong")
    assert "\\star" in detail
    assert score("\\boxed{\\boxed{3} \\text{ or } 4}", "3")[:2] == (False, "several_boxed_answers")
    assert score("\\boxed{x = 4}", "4") == (True, "correct", "")


def test_the_parts_changed_to_catch_ignored_notation() -> None:
    changed = dict((part, variant) for variant, part in perturbations("3x + \\text{m} 12"))
    assert changed == {
        "3": "73x + \\text{m} 12",
        "x": "3\\zeta  + \\text{m} 12",
        "12": "3x + \\text{m} 712",
    }


def test_statements_list_their_values() -> None:
    assert stated("x = 3 \\lor x = 4").values == ["3", "4"]
    assert stated("\\pm 3").values == ["+ 3", "- 3"]
    assert stated("1,000").values == ["1000"]
    assert stated("(1, 2)").values == ["(1,2)"]
    assert stated("3 \\star 4").unclear == ["\\star"]
    assert stated("3 \\star 4", allowed={"\\star"}).unclear == []
    assert stated("x^2 + y^2 = 1").relation
    assert not stated("y = 2x + 1").relation


def test_a_hedged_answer_scores_zero_through_the_env() -> None:
    env = gym.make("agentgym/Math-v0", size=4)
    try:
        env.reset(options={"task_id": 0})
        answer = env.unwrapped.tasks[0].answer
        hedge = f"\\boxed{{{answer} \\lor {answer}1}}"
        _, reward, terminated, _, info = env.step(f"Either way: {hedge}")
        assert (reward, terminated, info["success"]) == (0.0, True, False)
        assert "several values" in info["grade_detail"]
        env.reset(options={"task_id": 0})
        assert env.step(f"\\boxed{{{answer}}}")[1] == 1.0
    finally:
        env.close()


# The structures a box is read as (intervals, sets, thousands separators, percents, relations,
# bases, bound variables): a hedge built from any of them still scores 0 ...
STRUCTURE_HEDGES = [
    ("p=5,q=2;p=7,q=2", "(5,2),(7,2),(1,1)"),
    ("p=5,q=2;p=7,q=2", "(2,5),(2,7)"),
    ("p=5,q=2;p=7,q=2", "(5,2)"),
    ("(2,12)", "(2,12) \\lor (3,4)"),
    ("(2, 12) \\cup (12, 102)", "(2,12) \\cup (12,102) \\cup (200,300)"),
    ("(2, 12) \\cup (12, 102)", "(2,12102)"),
    ("\\{1, 2\\}", "\\{1, 2\\} \\cup \\{3\\}"),
    ("\\{1, 2\\}", "\\{1, 2\\} \\cup 3"),
    ("3", "{3, 4}"),
    ("3", "x = {3, 4}"),
    ("3", "x \\in {3, 4}"),
    ("\\{3\\}", "{3, 4}"),
    ("x < 1", "x < 1 \\lor x < 2"),
    ("x < 1", "x < 1 \\text{ or } x > 5"),
    ("x < 1", "-x > -1 \\lor -x > -2"),
    ("x < 1", "x \\le 1"),
    ("x < 1", "x < 1 < 2"),
    ("x < 1", "1"),
    ("x < 1", "x"),
    ("x<1", "x < 1 \\quad x < 2"),
    ("x < 1", "x<1 \\lor x \\ge 1"),
    ("x < 1", "(-\\infty, 1) \\cup (5, \\infty)"),
    ("x < 1", "x \\in (-\\infty, 1) \\cup (5, \\infty)"),
    ("x<1", "x<1, x<2"),
    ("x < 1", "x \\neq 1"),
    ("-2 \\le x \\le 7", "x \\in [-2, 7] \\cup [8, 9]"),
    ("-2 \\le x \\le 7", "-2 \\le x \\le 7 \\text{ or } x = 8"),
    ("-2 \\le x \\le 7", "[-2, 8]"),
    ("1000", "1,000, 2,000"),
    ("1000", "1\\,000 \\, 2\\,000"),
    ("1000", "1\\,000\\,2\\,000"),
    ("1000", "1{,}000 \\lor 2{,}000"),
    ("1000", "1,\\!000 \\text{ or } 2,\\!000"),
    ("1000", "1 000 \\text{ or } 2 000"),
    ("1000", "1~000 ~ 2~000"),
    ("1000", "1,000,2"),
    ("54", "204_5 \\lor 55"),
    ("5", "12_3 \\text{ or } 6"),
    ("54", "204_6"),
    ("35", "35.0\\% \\lor 36\\%"),
    ("35", "35.0\\%, 36.0\\%"),
    ("35", "35.5\\%"),
    ("35", "35 percent or 36 percent"),
    ("(5, 8)", "(x, y) = (5, 8) \\text{ or } (1, 2)"),
    ("(5, 8), (8, 5)", "(x, y) = (5, 8) \\text{ and } (8, 5) \\text{ and } (1, 1)"),
    ("(5, 8)", "(x, y) = (5, 8) = (1, 2)"),
    ("6", "\\sum_{k=1}^{3} k \\lor 7"),
    ("\\frac{1}{2}", "\\int_0^1 x \\, dx \\lor 1"),
    ("\\frac{1}{2}", "\\int_0^1 7 \\, dx"),
    ("1, 2", "1, 1, 2, 3"),
    ("1, 2", "1, 1"),
    ("\\frac{1}{2}", "\\\\frac{1}{2} \\\\lor 3"),
    ("\\frac{1}{2}", "\\\\frac{1}{3}"),
    ("16386.20", "\\$16,\\!386.20 \\text{ or } \\$16,\\!387"),
    ("11111111100", "11,\\! 111,\\! 111,\\! 100 \\lor 5"),
    ("2", "{1, 2}"),
    ("\\{1, 2, 3\\}", "{1, 2, 3, 4}"),
]


@pytest.mark.parametrize(
    ("reference", "answer"), STRUCTURE_HEDGES, ids=[a for _, a in STRUCTURE_HEDGES]
)
def test_a_hedge_in_a_structure_scores_zero(reference: str, answer: str) -> None:
    assert not check_answer(reference, answer)[0], f"{answer!r} graded equal to {reference!r}"


# ... and each structure, written as MATH's solutions and models write it, scores 1.
STRUCTURES_EQUAL = [
    ("p=5,q=2;p=7,q=2", "(5,2),(7,2)"),
    ("p=5,q=2;p=7,q=2", "q=2,p=5;q=2,p=7"),
    ("(2, 12) \\cup (12, 102)", "(2,12) \\cup (12,102)"),
    ("11111111100", "11,\\! 111,\\! 111,\\! 100"),
    ("16386.20", "\\$16,\\!386.20"),
    ("35", "35.0\\%"),
    ("\\{2, 3, 5, 7, 13\\}", "{2, 3, 5, 7, 13}"),
    ("x < 1", "-x > -1"),
    ("(5, 8), (8, 5)", "(x, y) = (5, 8) \\text{ and } (8, 5)"),
    ("204_5", "204_{5}"),
    ("204_5", "204_5"),
    ("1000", "1\\,000"),
    ("1000", "1~000"),
    ("1000", "1{,}000"),
    ("1000", "1 000"),
    ("-2 \\le x \\le 7", "x \\in [-2, 7]"),
    ("x \\in [-2, 7]", "-2 \\le x \\le 7"),
    ("F_n = \\sum_{k=0}^{n-1} F_k F_{n-k-1}", "F_n = \\sum_{k=0}^{n-1} F_{n-k-1} F_k"),
    ("x < 1", "x < 1"),
    ("3, 3", "3, 3"),
    ("28\\%", "28 percent"),
    ("12.5", "12.50\\%"),
    ("\\pm 2021", "{-2021, 2021}"),
    ("x \\le 1", "-x \\ge -1"),
    ("x < 1", "(-\\infty, 1)"),
    ("\\frac{1}{2}", "\\\\frac{1}{2}"),
    ("5", "5 \\text{ cm}"),
    ("x = 5", "x=5"),
    ("\\int_0^1 x^2 \\, dx", "\\frac{1}{3}"),
    ("\\lim_{n \\to \\infty} \\frac{1}{n}", "0"),
    ("6", "\\sum_{k=1}^{3} 2"),
    ("3", "3, 3"),
]


@pytest.mark.parametrize(
    ("reference", "answer"), STRUCTURES_EQUAL, ids=[a for _, a in STRUCTURES_EQUAL]
)
def test_a_structure_in_any_spelling_scores(reference: str, answer: str) -> None:
    correct, why = check_answer(reference, answer)
    assert correct, f"{answer!r} graded unequal to {reference!r} ({why})"


@pytest.mark.parametrize(
    ("reference", "answer"), [("204_5", "54"), ("54", "204_5"), ("10_2", "2"), ("204_5", "204_6")]
)
def test_a_number_in_another_base_than_the_references_scores_zero(
    reference: str, answer: str
) -> None:
    """Equal values, but "write 54 in base 5" is not answered by 54, nor "204_5 in decimal" by
    204_5."""
    correct, why = check_answer(reference, answer)
    assert not correct
    assert "base" in why


def test_canonical_spellings() -> None:
    assert canonical("11,\\! 111,\\! 111,\\! 100") == "11111111100"
    assert canonical("(2,12) \\cup (12,102)") == "(2,12) \\cup (12,102)"
    assert canonical("{2, 3, 5}") == "\\{2, 3, 5\\}"
    assert canonical("{1,000}") == "{1000}"
    assert canonical("35.0\\%") == "35\\%"
    assert canonical("204_5") == "54"
    assert canonical("204_3") == "204_3"  # not a base-3 numeral: left as written
    assert canonical("x_1") == "x_1"
    assert canonical("\\\\frac{1}{2}") == "\\frac{1}{2}"


def test_one_box_per_value_of_a_several_valued_reference() -> None:
    """Boxing each solution of a several-valued reference is its answer; one extra box, or any
    second box against a one-value reference, is a hedge."""
    assert score("\\boxed{(2, 2)} and \\boxed{(6, 2)}", "(2, 2), (6, 2)")[:2] == (True, "correct")
    assert score("\\boxed{-3}, \\boxed{3}, \\boxed{3}", "\\pm 3")[:2] == (True, "correct")
    assert score("\\boxed{1} \\boxed{2} \\boxed{3}", "1, 2")[:2] == (False, "wrong")
    assert score("\\boxed{1} \\boxed{1}", "1, 2")[:2] == (False, "wrong")
    assert score("\\boxed{3} or \\boxed{4}", "3")[:2] == (False, "several_boxed_answers")
    assert score("\\boxed{1, 2} \\boxed{3}", "1, 2")[:2] == (False, "wrong")
