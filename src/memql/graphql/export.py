"""Print the SDL: `python -m memql.graphql.export > schema.graphql`."""

from memql.graphql.schema import schema

if __name__ == "__main__":
    print(schema.as_str())
