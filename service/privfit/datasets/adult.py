"""The declared public schema of the UCI Adult (Census Income) dataset.

Column order, levels and the missing marker follow the UCI description (``adult.names``; Becker & Kohavi 1996)
and ``data/adult/README.md``: no header row, fields separated by ", ", ``?`` marks a missing value.
Bounds are public domain knowledge, not measured on the data:

* age 17–90: the extract covers persons older than 16; ages are top-coded at 90;
* education-num 1–16: the index of the 16 education levels;
* capital-gain 0–99999: 99999 is the census top code;
* capital-loss 0–5000: a round declared cap (larger losses are clipped);
* hours-per-week 1–99: 99 is the census top code.

``fnlwgt`` (a census sampling weight, not an attribute of the person) is declared ``"ignore"``.

Missing values (``?`` in workclass, occupation, native-country) are handled by ``missing = "impute"``:
a missing categorical becomes an all-zero one-hot block. The numeric ``fill`` values (required by that policy)
are public conventions (age 40, education-num 9 = HS-grad, no capital gain/loss, a 40-hour week); the
numeric columns of the UCI files have no missing values, so they are never used on them.
"""

from __future__ import annotations

from .schema import DatasetSchema

__all__ = ["ADULT_COLUMNS", "adult_schema"]

#: Column order of adult.data / adult.test.
ADULT_COLUMNS: list[str] = [
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
    "income",
]

_LEVELS: dict[str, list[str]] = {
    "workclass": [
        "Private",
        "Self-emp-not-inc",
        "Self-emp-inc",
        "Federal-gov",
        "Local-gov",
        "State-gov",
        "Without-pay",
        "Never-worked",
    ],
    "education": [
        "Bachelors",
        "Some-college",
        "11th",
        "HS-grad",
        "Prof-school",
        "Assoc-acdm",
        "Assoc-voc",
        "9th",
        "7th-8th",
        "12th",
        "Masters",
        "1st-4th",
        "10th",
        "Doctorate",
        "5th-6th",
        "Preschool",
    ],
    "marital-status": [
        "Married-civ-spouse",
        "Divorced",
        "Never-married",
        "Separated",
        "Widowed",
        "Married-spouse-absent",
        "Married-AF-spouse",
    ],
    "occupation": [
        "Tech-support",
        "Craft-repair",
        "Other-service",
        "Sales",
        "Exec-managerial",
        "Prof-specialty",
        "Handlers-cleaners",
        "Machine-op-inspct",
        "Adm-clerical",
        "Farming-fishing",
        "Transport-moving",
        "Priv-house-serv",
        "Protective-serv",
        "Armed-Forces",
    ],
    "relationship": ["Wife", "Own-child", "Husband", "Not-in-family", "Other-relative", "Unmarried"],
    "race": ["White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"],
    "sex": ["Female", "Male"],
    "native-country": [
        "United-States",
        "Cambodia",
        "England",
        "Puerto-Rico",
        "Canada",
        "Germany",
        "Outlying-US(Guam-USVI-etc)",
        "India",
        "Japan",
        "Greece",
        "South",
        "China",
        "Cuba",
        "Iran",
        "Honduras",
        "Philippines",
        "Italy",
        "Poland",
        "Jamaica",
        "Vietnam",
        "Mexico",
        "Portugal",
        "Ireland",
        "France",
        "Dominican-Republic",
        "Laos",
        "Ecuador",
        "Taiwan",
        "Haiti",
        "Columbia",
        "Hungary",
        "Guatemala",
        "Nicaragua",
        "Scotland",
        "Thailand",
        "Yugoslavia",
        "El-Salvador",
        "Trinadad&Tobago",
        "Peru",
        "Hong",
        "Holand-Netherlands",
    ],
}

# name: (lower, upper, fill)
_NUMERIC: dict[str, tuple[float, float, float]] = {
    "age": (17.0, 90.0, 40.0),
    "education-num": (1.0, 16.0, 9.0),
    "capital-gain": (0.0, 99999.0, 0.0),
    "capital-loss": (0.0, 5000.0, 0.0),
    "hours-per-week": (1.0, 99.0, 40.0),
}


def adult_schema(epsilon: float, delta: float, *, test_file: bool = False) -> DatasetSchema:
    """Return the declared public schema of UCI Adult with the budget (epsilon, delta).

    Args:
        epsilon: total ε budget of the dataset (> 0).
        delta: total δ budget of the dataset, in (0, 1).
        test_file: declare the layout of ``adult.test`` instead of ``adult.data``: its labels are written
            ``>50K.`` / ``<=50K.`` (with a trailing dot) and its first line is a comment starting with ``#``.

    The encoded matrix has d = 104 columns (5 numeric + 99 one-hot) and row-norm bound sqrt(13).
    """
    features: list[dict[str, object]] = []
    for name in ADULT_COLUMNS[:-1]:
        if name == "fnlwgt":
            features.append({"name": name, "type": "ignore"})
        elif name in _NUMERIC:
            lower, upper, fill = _NUMERIC[name]
            features.append({"name": name, "type": "numeric", "lower": lower, "upper": upper, "fill": fill})
        else:
            features.append({"name": name, "type": "categorical", "levels": list(_LEVELS[name])})
    suffix = "." if test_file else ""
    return DatasetSchema.model_validate(
        {
            "label": {
                "name": "income",
                "type": "binary",
                "positive": ">50K" + suffix,
                "negative": "<=50K" + suffix,
            },
            "features": features,
            "missing": "impute",
            "budget": {"epsilon": epsilon, "delta": delta},
            "csv": {"header": False, "columns": list(ADULT_COLUMNS), "na_values": ["", "?"], "comment": "#"},
        }
    )
