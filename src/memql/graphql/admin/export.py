"""Print the admin API's SDL: `python -m memql.graphql.admin.export > schema.admin.graphql`."""

from memql.graphql.admin.schema import schema

if __name__ == "__main__":
    print(schema.as_str())
