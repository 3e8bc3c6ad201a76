"""dialcheck's own three-way NLI model: training data, training, export, evaluation, inference."""
